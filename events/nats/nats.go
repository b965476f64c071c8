// Package nats is the scale-out event log: events.Log on NATS JetStream.
//
// Layout, for a deployment prefix P:
//
//	stream P_EVENTS, subjects P.events.<partition> (events by key hash) and P.replay.<group>
//	  (dead letters replayed to one group); file storage; Nats-Msg-Id de-duplication (window 10 min)
//	durable pull consumer <group>_p<partition> per group and partition, filtered to its subject,
//	  explicit ack, MaxAckPending 1 (so one key's events are handled one at a time, in order, however
//	  many subscribers share the group), redelivery after AckWait, NakWithDelay for retries
//	durable pull consumer <group>_replay per group, filtered to P.replay.<group>
//	KV bucket P_DLQ (a stream underneath): key <group>.<hex(event id)> -> dead letter (JSON)
//
// Delivery attempts come from JetStream's own count (NumDelivered). The dead-letter decision is the
// runner's (MaxDeliver is unlimited), so both backends dead-letter by the same rule.
package nats

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// Options configure a Log.
type Options struct {
	URL string // e.g. nats://127.0.0.1:4222
	// Prefix names the streams and subjects (one deployment, or one test); 0-9A-Za-z_ only.
	Prefix string
	// Partitions is the number of partitions of a new stream; 0 means 16.
	Partitions int
	// Replicas of the streams (1 on a single server; 3 on a cluster).
	Replicas int
}

// Log is events.Log on JetStream.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	dlq    jetstream.KeyValue
	prefix string
	parts  int

	mu        sync.Mutex
	consumers map[string]jetstream.Consumer // by durable name
}

var _ events.Log = (*Log)(nil)

const dedupWindow = 10 * time.Minute

// Open connects and creates (or updates) the streams.
func Open(ctx context.Context, o Options) (*Log, error) {
	const op rookery.Op = "nats.Open"
	if o.Partitions <= 0 {
		o.Partitions = 16
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Prefix == "" || strings.ContainsAny(o.Prefix, ".*> ") {
		return nil, rookery.E(op, rookery.Invalid, "a prefix of letters, digits and _ is required")
	}
	nc, err := nats.Connect(o.URL, nats.Name("rookery"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, rookery.E(op, rookery.Unavailable, "cannot connect to NATS", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, rookery.E(op, rookery.Internal, err)
	}
	l := &Log{nc: nc, js: js, prefix: o.Prefix, parts: o.Partitions, consumers: map[string]jetstream.Consumer{}}
	l.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       o.Prefix + "_EVENTS",
		Subjects:   []string{o.Prefix + ".events.*", o.Prefix + ".replay.*"},
		Storage:    jetstream.FileStorage,
		Replicas:   o.Replicas,
		Duplicates: dedupWindow,
	})
	if err == nil {
		l.dlq, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: o.Prefix + "_DLQ", Storage: jetstream.FileStorage, Replicas: o.Replicas,
		})
	}
	if err != nil {
		nc.Close()
		return nil, translate(op, err)
	}
	return l, nil
}

// Destroy deletes the streams of prefix (tests clean up with it).
func (l *Log) Destroy(ctx context.Context) error {
	err1 := l.js.DeleteStream(ctx, l.prefix+"_EVENTS")
	err2 := l.js.DeleteKeyValue(ctx, l.prefix+"_DLQ")
	return errors.Join(err1, err2)
}

func translate(op rookery.Op, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected):
		return rookery.E(op, rookery.Unavailable, "NATS is unavailable", err)
	}
	return rookery.E(op, rookery.Internal, err)
}

func (l *Log) eventSubject(p int) string     { return fmt.Sprintf("%s.events.%d", l.prefix, p) }
func (l *Log) replaySubject(g string) string { return l.prefix + ".replay." + g }
func dlqKey(group, id string) string         { return group + "." + hex.EncodeToString([]byte(id)) }
func checkGroup(op rookery.Op, g string) error {
	if !rookery.ValidUserID(g) {
		return rookery.E(op, rookery.Invalid, "a group name is 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	return nil
}

// Append implements events.Log: every event is published asynchronously with its id as
// Nats-Msg-Id, and Append returns once the server has stored them all.
func (l *Log) Append(ctx context.Context, evs []rookery.Event) error {
	const op rookery.Op = "nats.Append"
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	for _, ev := range evs {
		if ev.ID == "" || ev.Type == "" || ev.Key == "" {
			return rookery.E(op, rookery.Invalid, "an event needs an id, a type and a key")
		}
	}
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, "event payload is not JSON", err)
		}
		f, err := l.js.PublishMsgAsync(&nats.Msg{Subject: l.eventSubject(events.Partition(ev.Key, l.parts)), Data: data}, jetstream.WithMsgID(ev.ID))
		if err != nil {
			return translate(op, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return translate(op, err)
		case <-ctx.Done():
			return translate(op, ctx.Err())
		}
	}
	return nil
}

// consumer returns the durable consumer name on subject, creating or updating it.
func (l *Log) consumer(ctx context.Context, name, subject string, ackWait time.Duration) (jetstream.Consumer, error) {
	l.mu.Lock()
	c, ok := l.consumers[name]
	l.mu.Unlock()
	if ok && ackWait == 0 {
		return c, nil
	}
	if ackWait == 0 {
		ackWait = events.DefaultAckWait
	}
	c, err := l.js.CreateOrUpdateConsumer(ctx, l.prefix+"_EVENTS", jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       ackWait,
		MaxAckPending: 1,
		MaxDeliver:    -1,
	})
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.consumers[name] = c
	l.mu.Unlock()
	return c, nil
}

// groupConsumers returns the group's partition consumers and, last, its replay consumer.
func (l *Log) groupConsumers(ctx context.Context, group string, ackWait time.Duration) ([]jetstream.Consumer, error) {
	var cs []jetstream.Consumer
	for p := range l.parts {
		c, err := l.consumer(ctx, fmt.Sprintf("%s_p%d", group, p), l.eventSubject(p), ackWait)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	c, err := l.consumer(ctx, group+"_replay", l.replaySubject(group), ackWait)
	if err != nil {
		return nil, err
	}
	return append(cs, c), nil
}

// Subscribe implements events.Log. A subscription pulls from each of the group's consumers in a
// goroutine of its own; Next takes whichever message arrives first.
func (l *Log) Subscribe(ctx context.Context, group string, opts events.SubscribeOptions) (events.Subscription, error) {
	const op rookery.Op = "nats.Subscribe"
	if err := checkGroup(op, group); err != nil {
		return nil, err
	}
	if opts.AckWait <= 0 {
		opts.AckWait = events.DefaultAckWait
	}
	cs, err := l.groupConsumers(ctx, group, opts.AckWait)
	if err != nil {
		return nil, translate(op, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &subscription{ackWait: opts.AckWait, msgs: make(chan pulled), cancel: cancel, held: map[*delivery]bool{}, demand: make(chan struct{})}
	for _, c := range cs {
		s.wg.Add(1)
		go s.pull(sctx, c)
	}
	return s, nil
}

type subscription struct {
	ackWait time.Duration
	msgs    chan pulled
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// waiting counts Next calls waiting for a message; pullers fetch only while it is positive, so
	// a subscription that is not asking holds no messages. demand is closed (and replaced) when a
	// Next starts waiting.
	waiting atomic.Int64
	dmu     sync.Mutex
	demand  chan struct{}

	mu     sync.Mutex
	held   map[*delivery]bool // taken by Next, not yet acked or naked
	closed bool
}

// handoff is how long a pulled message waits for a Next to take it before it is handed back (nak)
// for delivery elsewhere. Only a subscription that stopped asking meanwhile hits it.
const handoff = time.Second

func (s *subscription) pull(ctx context.Context, c jetstream.Consumer) {
	defer s.wg.Done()
	for ctx.Err() == nil {
		if s.waiting.Load() == 0 {
			s.dmu.Lock()
			demand := s.demand
			s.dmu.Unlock()
			if s.waiting.Load() == 0 {
				select {
				case <-demand:
				case <-ctx.Done():
					return
				}
			}
			continue
		}
		m, err := c.Next(jetstream.FetchMaxWait(250 * time.Millisecond))
		fetched := time.Now() // the ack wait runs from about here, not from when a Next takes it
		if err != nil {
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // the server is away; the client reconnects
			}
			continue
		}
		t := time.NewTimer(handoff)
		select {
		case s.msgs <- pulled{m, fetched}:
		case <-t.C:
			m.Nak()
		case <-ctx.Done():
			m.Nak() // not handed out: deliver it again at once
		}
		t.Stop()
	}
}

// pulled is a message and when it was fetched.
type pulled struct {
	m  jetstream.Msg
	at time.Time
}

type delivery struct {
	s       *subscription
	m       jetstream.Msg
	ev      rookery.Event
	attempt int
	at      time.Time
}

func (d *delivery) Event() rookery.Event { return d.ev }
func (d *delivery) Attempt() int         { return d.attempt }

// Next implements events.Subscription.
func (s *subscription) Next(ctx context.Context) (events.Delivery, error) {
	const op rookery.Op = "nats.Next"
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	s.dmu.Lock()
	close(s.demand)
	s.demand = make(chan struct{})
	s.dmu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil, rookery.E(op, rookery.Unavailable, ctx.Err())
		case p := <-s.msgs:
			m := p.m
			var ev rookery.Event
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				m.Term() // never deliverable; JetStream drops it
				continue
			}
			meta, err := m.Metadata()
			if err != nil {
				m.Nak()
				continue
			}
			d := &delivery{s: s, m: m, ev: ev, attempt: int(meta.NumDelivered), at: p.at}
			s.mu.Lock()
			s.held[d] = true
			s.mu.Unlock()
			return d, nil
		}
	}
}

func (s *subscription) release(d *delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.held[d]
	delete(s.held, d)
	return ok
}

// Ack implements events.Delivery; an ack after the ack wait is Conflict (JetStream has delivered
// the event again by then). The wait is counted from the fetch, which the server's send precedes
// by a network hop, so an ack in the last 5% of it is refused too: refusing only costs a
// redelivery, while accepting a stale ack would take back an event that is being handled again.
func (d *delivery) Ack(ctx context.Context) error {
	const op rookery.Op = "nats.Ack"
	if !d.s.release(d) || time.Since(d.at) >= d.s.ackWait-d.s.ackWait/20 {
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	return translate(op, d.m.DoubleAck(ctx))
}

// Nak implements events.Delivery.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	const op rookery.Op = "nats.Nak"
	if !d.s.release(d) {
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	return translate(op, d.m.NakWithDelay(delay))
}

// Close implements events.Subscription: held deliveries are naked, so they are delivered again
// at once.
func (s *subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	held := s.held
	s.held = map[*delivery]bool{}
	s.mu.Unlock()
	s.cancel()
	for d := range held {
		d.m.Nak()
	}
	s.wg.Wait()
	return nil
}

// DeadLetter implements events.Log.
func (l *Log) DeadLetter(ctx context.Context, group string, d events.DeadLetter) error {
	const op rookery.Op = "nats.DeadLetter"
	if err := checkGroup(op, group); err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return rookery.E(op, rookery.Invalid, err)
	}
	_, err = l.dlq.Put(ctx, dlqKey(group, d.Event.ID), b)
	return translate(op, err)
}

// DeadLetters implements events.Log.
func (l *Log) DeadLetters(ctx context.Context, group, after string, limit int) ([]events.DeadLetter, error) {
	const op rookery.Op = "nats.DeadLetters"
	if err := checkGroup(op, group); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	lister, err := l.dlq.ListKeysFiltered(ctx, group+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, translate(op, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys) // hex keeps the order of the ids
	afterKey := ""
	if after != "" {
		afterKey = dlqKey(group, after)
	}
	var out []events.DeadLetter
	for _, k := range keys {
		if k <= afterKey || len(out) == limit {
			continue
		}
		e, err := l.dlq.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, translate(op, err)
		}
		var d events.DeadLetter
		if err := json.Unmarshal(e.Value(), &d); err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetterByID implements events.Log.
func (l *Log) DeadLetterByID(ctx context.Context, group, id string) (events.DeadLetter, error) {
	d, _, err := l.deadLetter(ctx, "nats.DeadLetterByID", group, id)
	return d, err
}

func (l *Log) deadLetter(ctx context.Context, op rookery.Op, group, id string) (events.DeadLetter, uint64, error) {
	if err := checkGroup(op, group); err != nil {
		return events.DeadLetter{}, 0, err
	}
	e, err := l.dlq.Get(ctx, dlqKey(group, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.DeadLetter{}, 0, rookery.E(op, rookery.NotFound, "no such dead letter")
	}
	if err != nil {
		return events.DeadLetter{}, 0, translate(op, err)
	}
	var d events.DeadLetter
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return events.DeadLetter{}, 0, rookery.E(op, rookery.Internal, err)
	}
	return d, e.Revision(), nil
}

// Replay implements events.Log.
func (l *Log) Replay(ctx context.Context, group, id string) error {
	const op rookery.Op = "nats.Replay"
	d, rev, err := l.deadLetter(ctx, op, group, id)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(d.Event)
	// A message id of its own: a replay must not be taken for a duplicate of the original.
	msgID := fmt.Sprintf("replay-%s-%s-%d", group, id, rev)
	if _, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.replaySubject(group), Data: data}, jetstream.WithMsgID(msgID)); err != nil {
		return translate(op, err)
	}
	return translate(op, l.dlq.Purge(ctx, dlqKey(group, id)))
}

// Drop implements events.Log.
func (l *Log) Drop(ctx context.Context, group, id string) error {
	const op rookery.Op = "nats.Drop"
	if _, _, err := l.deadLetter(ctx, op, group, id); err != nil {
		return err
	}
	return translate(op, l.dlq.Purge(ctx, dlqKey(group, id)))
}

// Lag implements events.Log.
func (l *Log) Lag(ctx context.Context, group string) (int64, time.Time, error) {
	const op rookery.Op = "nats.Lag"
	if err := checkGroup(op, group); err != nil {
		return 0, time.Time{}, err
	}
	cs, err := l.groupConsumers(ctx, group, 0)
	if err != nil {
		return 0, time.Time{}, translate(op, err)
	}
	var n int64
	var oldest time.Time
	for _, c := range cs {
		info, err := c.Info(ctx)
		if err != nil {
			return 0, time.Time{}, translate(op, err)
		}
		behind := int64(info.NumPending) + int64(info.NumAckPending)
		if behind == 0 {
			continue
		}
		n += behind
		m, err := l.stream.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(info.Config.FilterSubject))
		if err != nil {
			return 0, time.Time{}, translate(op, err)
		}
		if oldest.IsZero() || m.Time.Before(oldest) {
			oldest = m.Time
		}
	}
	return n, oldest, nil
}

// Ping implements events.Log: the stream must answer.
func (l *Log) Ping(ctx context.Context) error {
	_, err := l.stream.Info(ctx)
	return translate("nats.Ping", err)
}

// Close implements events.Log.
func (l *Log) Close() error {
	l.nc.Close()
	return nil
}
