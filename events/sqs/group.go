package sqs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// member is a consumer group in one process: it receives the group's messages, holds them per
// message group in order, hands out each message group's head to its subscriptions, and keeps the
// held messages invisible to other processes until they are acked, nakked or given back.
type member struct {
	l       *Log
	group   string
	q       *queue
	ackWait time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	held    map[string][]*delivery // by message group, in order; only the head may be handed out
	byMsg   map[string]*delivery   // by SQS message id
	ready   []*delivery            // heads not handed out, in the order they became heads
	changed chan struct{}          // closed and replaced when ready grows or the member stops
	subs    int
	stopped bool
	poll    pollState

	acks    chan ackReq   // to the deleter
	deleted chan struct{} // closed when the deleter has stopped

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// pollState is what the receive loop is doing, for a subscription's String.
type pollState struct {
	since    time.Time // when the running poll began; zero between polls
	lastEnd  time.Time // when the last poll ended
	lastGot  int       // messages it brought
	lastErr  error
	attempts int // polls so far
}

// ackReq is an ack waiting for its delete.
type ackReq struct {
	d    *delivery
	done chan error
}

// delivery is one receipt of a message.
type delivery struct {
	m       *member
	ev      rookery.Event
	msgID   string
	receipt string
	mgroup  string
	attempt int
	sent    time.Time
	sub     *subscription // who holds it, nil while buffered
	handed  time.Time
	stale   bool // received again since (this receipt expired), acked, nakked or given back
}

func newMember(l *Log, group string, q *queue, ackWait time.Duration) *member {
	if ackWait < time.Second {
		ackWait = time.Second // SQS counts visibility in seconds
	}
	return &member{
		l: l, group: group, q: q, ackWait: ackWait, log: l.log.With("consumer", group),
		held: map[string][]*delivery{}, byMsg: map[string]*delivery{}, changed: make(chan struct{}),
		acks: make(chan ackReq, 64), deleted: make(chan struct{}),
	}
}

func (m *member) start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done.Add(3)
	go m.receive()
	go m.heartbeat(ctx)
	go m.deleter(ctx)
}

// join adds a subscription; the caller holds l.mu.
func (m *member) join() *subscription {
	m.mu.Lock()
	m.subs++
	m.mu.Unlock()
	return &subscription{m: m}
}

// wake tells waiting subscriptions that something changed; the caller holds m.mu.
func (m *member) wake() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// receive long-polls the queue while the buffer has room, until the member stops. A poll is never
// cancelled: the server could still hand it messages that would then stay invisible for the ack
// wait; what a poll brings after the stop is given back. A poll that failed is tried again with
// the same ReceiveRequestAttemptId (so are the SDK's own retries), which makes SQS return the
// messages the lost answer held rather than keep their message groups locked for the ack wait.
func (m *member) receive() {
	defer m.done.Done()
	backoff := 100 * time.Millisecond
	attempt := rand.Text()
	for {
		m.mu.Lock()
		stopped := m.stopped
		room := m.l.o.Buffer - len(m.byMsg)
		ch := m.changed
		m.mu.Unlock()
		if stopped {
			return
		}
		if room <= 0 {
			select {
			case <-ch:
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		m.mu.Lock()
		m.poll.since = time.Now()
		m.poll.attempts++
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), m.l.o.WaitTime+10*time.Second)
		out, err := m.l.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl:                aws.String(m.q.url),
			MaxNumberOfMessages:     int32(min(10, room)),
			WaitTimeSeconds:         seconds(m.l.o.WaitTime),
			VisibilityTimeout:       seconds(m.ackWait),
			ReceiveRequestAttemptId: aws.String(attempt),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{
				sqstypes.MessageSystemAttributeNameApproximateReceiveCount,
				sqstypes.MessageSystemAttributeNameSentTimestamp,
				sqstypes.MessageSystemAttributeNameMessageGroupId,
			},
		})
		cancel()
		m.mu.Lock()
		m.poll.since, m.poll.lastEnd, m.poll.lastErr = time.Time{}, time.Now(), err
		if out != nil {
			m.poll.lastGot = len(out.Messages)
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Warn("receiving from SQS failed; retrying", "queue", m.q.url, "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		attempt = rand.Text()
		var late []*delivery
		for _, msg := range out.Messages {
			if d := m.add(msg); d != nil {
				late = append(late, d)
			}
		}
		m.giveBack(late)
	}
}

// add takes a received message into the buffer; it returns the delivery if the member stopped
// meanwhile (to give back).
func (m *member) add(msg sqstypes.Message) *delivery {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	attr := msg.Attributes
	d := &delivery{m: m, msgID: aws.ToString(msg.MessageId), receipt: aws.ToString(msg.ReceiptHandle),
		mgroup: attr[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]}
	d.attempt, _ = strconv.Atoi(attr[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(attr[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.sent = time.UnixMilli(ms)
	}
	if err := json.Unmarshal([]byte(aws.ToString(msg.Body)), &d.ev); err != nil || d.ev.ID == "" {
		// Not an event Rookery wrote: straight to the dead-letter queue, where an operator sees it.
		m.log.Warn("an SQS message is not an event; dead-lettering it", "queue", m.q.url, "message", d.msgID)
		body := aws.ToString(msg.Body)
		dl := events.DeadLetter{Event: rookery.Event{ID: d.msgID, Type: "Unreadable", Key: d.mgroup, Payload: jsonString(body)},
			Error: "the message is not a Rookery event", Attempts: d.attempt, FailedAt: rookery.Time{Time: time.Now().UTC()}}
		if err := m.l.DeadLetter(ctx, m.group, dl); err == nil {
			m.l.sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(m.q.url), ReceiptHandle: msg.ReceiptHandle})
		}
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return d
	}
	if old := m.byMsg[d.msgID]; old != nil {
		// Received again: the old receipt expired. The new one takes its place in the order.
		old.stale = true
		q := m.held[d.mgroup]
		for i, x := range q {
			if x == old {
				q[i] = d
			}
		}
		m.byMsg[d.msgID] = d
		if q[0] == d {
			m.removeReady(old)
			m.ready = append(m.ready, d)
			m.wake()
		}
		return nil
	}
	m.byMsg[d.msgID] = d
	m.held[d.mgroup] = append(m.held[d.mgroup], d)
	if len(m.held[d.mgroup]) == 1 {
		m.ready = append(m.ready, d)
		m.wake()
	}
	return nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (m *member) removeReady(d *delivery) {
	for i, x := range m.ready {
		if x == d {
			m.ready = append(m.ready[:i], m.ready[i+1:]...)
			return
		}
	}
}

// drop forgets d and every message held behind it in its message group, returning their receipts
// (to give back to SQS); the caller holds m.mu.
func (m *member) drop(d *delivery) []*delivery {
	q := m.held[d.mgroup]
	i := 0
	for i < len(q) && q[i] != d {
		i++
	}
	gone := q[i:]
	if i == 0 {
		delete(m.held, d.mgroup)
	} else {
		m.held[d.mgroup] = q[:i]
	}
	for _, x := range gone {
		x.stale = true
		delete(m.byMsg, x.msgID)
		m.removeReady(x)
	}
	return gone
}

// advance forgets the acked head d and makes the next message of its group ready; the caller
// holds m.mu.
func (m *member) advance(d *delivery) {
	d.stale = true
	delete(m.byMsg, d.msgID)
	q := m.held[d.mgroup]
	if len(q) == 0 || q[0] != d {
		return
	}
	if len(q) == 1 {
		delete(m.held, d.mgroup)
		return
	}
	m.held[d.mgroup] = q[1:]
	m.ready = append(m.ready, q[1])
	m.wake()
}

// deleter deletes acked messages in batches of up to 10 (one request instead of ten): what is
// waiting when it is free goes in one DeleteMessageBatch, so a lone ack waits for no one.
func (m *member) deleter(ctx context.Context) {
	defer m.done.Done()
	defer close(m.deleted)
	for {
		var batch []ackReq
		select {
		case <-ctx.Done():
			return
		case r := <-m.acks:
			batch = append(batch, r)
		}
	fill:
		for len(batch) < 10 {
			select {
			case r := <-m.acks:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(batch))
		for i, r := range batch {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.d.receipt)}
		}
		out, err := m.l.sqs.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.q.url), Entries: entries})
		if err != nil {
			err = translate("sqs.Ack", err)
			for _, r := range batch {
				r.done <- err
			}
			continue
		}
		failed := map[int]error{}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if aws.ToString(f.Code) == "ReceiptHandleIsInvalid" {
				failed[i] = rookery.E("sqs.Ack", rookery.Conflict, "the delivery expired")
			} else {
				failed[i] = rookery.E("sqs.Ack", rookery.Unavailable, aws.ToString(f.Code)+": "+aws.ToString(f.Message))
			}
		}
		for i, r := range batch {
			r.done <- failed[i]
		}
	}
}

// heartbeat keeps held messages invisible: buffered ones for another ack wait, handed-out ones
// until their ack wait from the hand-out ends.
func (m *member) heartbeat(ctx context.Context) {
	defer m.done.Done()
	period := m.ackWait / 3
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var ds []*delivery
		var vis []int32
		m.mu.Lock()
		for _, d := range m.byMsg {
			v := m.ackWait
			if !d.handed.IsZero() {
				v = d.handed.Add(m.ackWait).Sub(now)
				if v < period {
					continue // its ack wait ends before the next beat: let it
				}
			}
			ds = append(ds, d)
			vis = append(vis, seconds(v))
		}
		m.mu.Unlock()
		m.changeVisibility(ctx, ds, vis)
	}
}

// changeVisibility sets the visibility of ds (vis[i] seconds from now) in batches of 10.
func (m *member) changeVisibility(ctx context.Context, ds []*delivery, vis []int32) {
	for len(ds) > 0 {
		n := min(10, len(ds))
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, n)
		for i := range n {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(ds[i].receipt), VisibilityTimeout: vis[i],
			}
		}
		if _, err := m.l.sqs.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(m.q.url), Entries: entries,
		}); err != nil && ctx.Err() == nil {
			m.log.Warn("changing visibility in SQS failed", "queue", m.q.url, "err", err)
		}
		ds, vis = ds[n:], vis[n:]
	}
}

// giveBack makes ds visible to the group again at once.
func (m *member) giveBack(ds []*delivery) {
	if len(ds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.changeVisibility(ctx, ds, make([]int32, len(ds)))
}

// oldest is when the oldest message held was sent (zero if none).
func (m *member) oldest() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t time.Time
	for _, d := range m.byMsg {
		if t.IsZero() || d.sent.Before(t) {
			t = d.sent
		}
	}
	return t
}

// stop ends the member and gives back every message it holds.
func (m *member) stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.wake()
	m.mu.Unlock()
	m.cancel()
	m.done.Wait() // the poll has ended: nothing more comes in
	m.mu.Lock()
	var all []*delivery
	for _, d := range m.byMsg {
		d.stale = true
		all = append(all, d)
	}
	m.byMsg, m.held, m.ready = map[string]*delivery{}, map[string][]*delivery{}, nil
	m.mu.Unlock()
	m.giveBack(all)
	m.l.leave(m)
}

// subscription is one consumer of a member.
type subscription struct {
	m      *member
	mu     sync.Mutex
	closed bool
}

// Next implements events.Subscription.
func (s *subscription) Next(ctx context.Context) (events.Delivery, error) {
	const op rookery.Op = "sqs.Next"
	m := s.m
	for {
		m.mu.Lock()
		if m.stopped || s.isClosed() {
			m.mu.Unlock()
			return nil, rookery.E(op, rookery.Unavailable, "the subscription is closed")
		}
		if len(m.ready) > 0 {
			d := m.ready[0]
			m.ready = m.ready[1:]
			d.sub, d.handed = s, time.Now()
			m.mu.Unlock()
			return d, nil
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, rookery.E(op, rookery.Unavailable, ctx.Err())
		case <-ch:
		}
	}
}

// String describes the member's state, for a test that waited in vain: what it holds, what is
// ready, and what its receive loop is doing.
func (s *subscription) String() string {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	handed := 0
	for _, d := range m.byMsg {
		if !d.handed.IsZero() {
			handed++
		}
	}
	now := time.Now()
	polling := "between polls"
	if !m.poll.since.IsZero() {
		polling = fmt.Sprintf("polling for %v", now.Sub(m.poll.since).Round(time.Millisecond))
	}
	last := "none yet"
	if !m.poll.lastEnd.IsZero() {
		last = fmt.Sprintf("ended %v ago with %d messages, err %v", now.Sub(m.poll.lastEnd).Round(time.Millisecond), m.poll.lastGot, m.poll.lastErr)
	}
	return fmt.Sprintf("sqs group %s: %d messages held in %d message groups, %d handed out, %d ready; %d polls, %s; last poll %s",
		m.group, len(m.byMsg), len(m.held), handed, len(m.ready), m.poll.attempts, polling, last)
}

func (s *subscription) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close implements events.Subscription: what it was handed and did not ack goes back to the group
// (with what is held behind it); the last subscription stops the member.
func (s *subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	m := s.m
	m.mu.Lock()
	m.subs--
	if m.subs == 0 {
		// The member stops first: a poll still running would receive what is given back.
		m.mu.Unlock()
		m.stop()
		return nil
	}
	var back []*delivery
	for _, d := range m.byMsg {
		if d.sub == s && !d.stale {
			back = append(back, m.drop(d)...)
		}
	}
	m.wake()
	m.mu.Unlock()
	m.giveBack(back)
	return nil
}

func (d *delivery) Event() rookery.Event { return d.ev }
func (d *delivery) Attempt() int         { return max(1, d.attempt) }

// Ack implements events.Delivery: the message is deleted, then its group's next is handed out.
func (d *delivery) Ack(ctx context.Context) error {
	const op rookery.Op = "sqs.Ack"
	m := d.m
	m.mu.Lock()
	stale := d.stale
	m.mu.Unlock()
	if stale {
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	r := ackReq{d: d, done: make(chan error, 1)}
	select {
	case m.acks <- r:
	case <-m.deleted:
		return rookery.E(op, rookery.Unavailable, "the subscription is closed")
	case <-ctx.Done():
		return rookery.E(op, rookery.Unavailable, ctx.Err())
	}
	var err error
	select {
	case err = <-r.done:
	case <-ctx.Done():
		return rookery.E(op, rookery.Unavailable, ctx.Err())
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.advance(d)
	m.mu.Unlock()
	return nil
}

// Nak implements events.Delivery: the message, and those held behind it, become visible again
// after delay (SQS rounds it up to whole seconds), when its group receives them again in order.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	const op rookery.Op = "sqs.Nak"
	m := d.m
	m.mu.Lock()
	if d.stale {
		m.mu.Unlock()
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	gone := m.drop(d)
	m.mu.Unlock()
	vis := make([]int32, len(gone))
	for i := range vis {
		vis[i] = seconds(delay)
	}
	m.changeVisibility(ctx, gone, vis)
	return nil
}

func (m *member) isStopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}
