package nats

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// A member is one Log's part in a consumer group; every subscription of the group on that Log
// shares it. The members of a group divide its partitions among themselves with leases in the
// groups bucket, and a partition's owner reads it with an ordered consumer (server-side flow
// control, no acks) from the position it commits there. Within a partition the member hands out
// one event at a time, so a key's events are handled in order however many subscriptions share the
// group. Acks are local and cheap; positions are written to the bucket every flushEvery, and on
// leaving, so a crash costs at most that much redelivery.
//
// Bucket keys, for group G: G.p.<n> (partition n) and G.p.replay (the dead letters replayed to G)
// hold a partState; G.m.<member id> is a member's heartbeat. Leases need no clock agreement for a
// live owner: a member takes over a partition whose key it has seen unchanged for a lease TTL, and
// an owner that could not renew for 3/4 of the TTL stops handing out its events. Taking over and
// renewing are compare-and-set writes on the key's revision, so two members never both believe
// they own a partition past one renewal.
type member struct {
	l      *Log
	group  string
	id     string
	ttl    time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run has released everything and returned
	flushq chan chan error

	fetchers sync.WaitGroup

	mu    sync.Mutex
	refs  int // subscriptions
	parts []*part
	ready []*part       // partitions whose head event can be handed out, in the order they became so
	avail chan struct{} // one token per ready entry, at least (a Next takes a token, then a partition)

	// Owned by the run goroutine:
	seen   map[string]seenKey
	synced bool // the watch has delivered the bucket's current values
}

// partState is a partition's entry in the groups bucket.
type partState struct {
	Owner string `json:"owner,omitempty"` // member id; "" when free
	// Seq is the stream sequence up to which every event of the partition has been acked.
	Seq uint64 `json:"seq"`
	// Attempts counts the deliveries so far of the partition's next event.
	Attempts int `json:"attempts,omitempty"`
}

type seenKey struct {
	rev     uint64
	at      time.Time // when the key last changed, as far as this member knows
	deleted bool
	state   partState
}

type part struct {
	key     string // in the groups bucket
	subject string

	// Guarded by member.mu.
	owned     bool
	gen       int // changes whenever ownership does; stale fetchers and deliveries see it
	rev       uint64
	renewed   time.Time // when the last successful write of the lease was sent
	state     partState // Seq and Attempts run ahead of the bucket between flushes
	dirty     bool
	buf       []fetched // fetched events not yet acked; buf[0] is the head
	inflight  *delivery
	notBefore time.Time
	queued    bool
	space     chan struct{} // wakes a fetcher waiting for room in buf
	stop      context.CancelFunc
}

type fetched struct {
	seq uint64
	ev  rookery.Event
	bad bool // not an event this version can decode; skipped
}

const (
	flushEvery  = 50 * time.Millisecond
	maxBuffered = 1024 // fetched events held per partition
	pullBatch   = 512
	kvTimeout   = 5 * time.Second
)

func (l *Log) newMember(group string) *member {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{
		l: l, group: group, id: nuid.Next(), ttl: l.leaseTTL, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), flushq: make(chan chan error), seen: map[string]seenKey{},
	}
	for _, r := range l.partitions(group) {
		m.parts = append(m.parts, &part{key: r.key, subject: r.subject, space: make(chan struct{}, 1)})
	}
	m.avail = make(chan struct{}, len(m.parts))
	return m
}

// partRef names one of a group's partitions: its key in the groups bucket and its subject.
type partRef struct{ key, subject string }

// partitions returns group's partitions: the event log's, then the group's replay queue.
func (l *Log) partitions(group string) []partRef {
	refs := make([]partRef, 0, l.parts+1)
	for p := range l.parts {
		refs = append(refs, partRef{group + ".p." + strconv.Itoa(p), l.eventSubject(p)})
	}
	return append(refs, partRef{group + ".p.replay", l.replaySubject(group)})
}

func (m *member) memberKey() string         { return m.group + ".m." + m.id }
func (m *member) isMemberKey(k string) bool { return strings.HasPrefix(k, m.group+".m.") }

// run does all of the member's bucket traffic: watching, heartbeats, flushing positions,
// balancing partitions; on the way out it gives its partitions up.
func (m *member) run() {
	defer close(m.done)
	defer m.leave()
	var w jetstream.KeyWatcher
	for {
		var err error
		if w, err = m.l.groups.Watch(m.ctx, m.group+".>"); err == nil {
			break
		}
		m.l.log.Warn("watching the consumer group's leases failed; retrying", "group", m.group, "err", err)
		if !rookery.Sleep(m.ctx, time.Second) {
			return
		}
	}
	defer w.Stop()
	m.heartbeat()
	renew := time.NewTicker(m.ttl / 5)
	defer renew.Stop()
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return // the watch ends only with m.ctx
			}
			if m.observe(e) {
				m.balance()
			}
		case <-flush.C:
			m.flush(false)
		case <-renew.C:
			m.heartbeat()
			m.flush(true)
			m.balance()
		case reply := <-m.flushq:
			reply <- m.flush(false)
		}
	}
}

// observe records a watched change; it reports whether balancing may now find work.
func (m *member) observe(e jetstream.KeyValueEntry) bool {
	if e == nil {
		m.synced = true
		return true
	}
	now := time.Now()
	at := now
	if !m.synced && e.Created().Before(now) {
		at = e.Created() // a key last written long ago by a member since gone need not wait a TTL more
	}
	k := seenKey{rev: e.Revision(), at: at, deleted: e.Operation() != jetstream.KeyValuePut}
	if !m.isMemberKey(e.Key()) && !k.deleted {
		if err := json.Unmarshal(e.Value(), &k.state); err != nil {
			m.l.log.Error("a consumer group lease holds something else; taking it over", "key", e.Key(), "err", err)
			k.state = partState{}
		}
	}
	m.seen[e.Key()] = k
	if m.isMemberKey(e.Key()) {
		return m.synced
	}
	// Someone else owns a partition this member thinks is its own: it lost the lease.
	m.mu.Lock()
	for _, p := range m.parts {
		if p.key == e.Key() && p.owned && e.Revision() > p.rev && k.state.Owner != m.id {
			m.dropLocked(p)
		}
	}
	m.mu.Unlock()
	return m.synced && k.state.Owner == ""
}

func (m *member) heartbeat() {
	ctx, cancel := context.WithTimeout(m.ctx, kvTimeout)
	defer cancel()
	if _, err := m.l.groups.Put(ctx, m.memberKey(), nil); err != nil && m.ctx.Err() == nil {
		m.l.log.Warn("consumer group heartbeat failed", "group", m.group, "err", err)
	}
}

// flush writes the state of the owned partitions that changed (all of them if renew, which
// renews their leases) and drops the partitions whose lease it could not keep.
func (m *member) flush(renew bool) error {
	var firstErr error
	for _, p := range m.parts {
		m.mu.Lock()
		if !p.owned || !p.dirty && !renew {
			m.mu.Unlock()
			continue
		}
		st, rev, gen := p.state, p.rev, p.gen
		st.Owner = m.id
		p.dirty = false
		m.mu.Unlock()
		sent := time.Now()
		newRev, err := uint64(0), firstErr
		if firstErr == nil { // once the bucket failed to answer, the rest of the round only fences
			newRev, err = m.put(context.Background(), p.key, st, rev)
		}
		m.mu.Lock()
		switch {
		case p.gen != gen:
		case err == nil:
			p.rev, p.renewed = newRev, sent
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists):
			m.l.log.Info("a partition moved to another member of the consumer group", "group", m.group, "key", p.key)
			m.dropLocked(p)
		default:
			p.dirty = true
			if firstErr == nil {
				firstErr = err
			}
			if time.Since(p.renewed) > m.ttl*3/4 {
				m.l.log.Warn("could not renew a partition's lease; leaving it to the group", "group", m.group, "key", p.key, "err", err)
				m.dropLocked(p)
			}
		}
		m.mu.Unlock()
	}
	return firstErr
}

// put writes st under key if its revision is still rev (0: if the key does not exist).
func (m *member) put(ctx context.Context, key string, st partState, rev uint64) (uint64, error) {
	b, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if rev == 0 {
		return m.l.groups.Create(ctx, key, b)
	}
	return m.l.groups.Update(ctx, key, b, rev)
}

// balance gives up partitions beyond this member's share and claims free or expired ones up to it.
func (m *member) balance() {
	if !m.synced || m.ctx.Err() != nil {
		return
	}
	now := time.Now()
	live := 1
	for k, s := range m.seen {
		if !m.isMemberKey(k) || k == m.memberKey() || s.deleted {
			continue
		}
		if now.Sub(s.at) < m.ttl {
			live++
		} else if now.Sub(s.at) > 10*m.ttl {
			ctx, cancel := context.WithTimeout(m.ctx, kvTimeout)
			m.l.groups.Delete(ctx, k, jetstream.LastRevision(s.rev)) // a member long gone; best effort
			cancel()
		}
	}
	share := (len(m.parts) + live - 1) / live
	owned := 0
	m.mu.Lock()
	for _, p := range m.parts {
		if p.owned {
			owned++
		}
	}
	m.mu.Unlock()
	for i := len(m.parts) - 1; i >= 0 && owned > share; i-- {
		if m.release(m.parts[i]) {
			owned--
		}
	}
	h := fnv.New32a()
	h.Write([]byte(m.id))
	start := int(h.Sum32() % uint32(len(m.parts)))
	for j := range m.parts {
		if owned >= share {
			break
		}
		p := m.parts[(start+j)%len(m.parts)]
		m.mu.Lock()
		mine := p.owned
		m.mu.Unlock()
		if mine {
			continue
		}
		s, ok := m.seen[p.key]
		var st partState
		var rev uint64
		switch {
		case !ok || s.deleted:
			rev = 0
		case s.state.Owner == "" || now.Sub(s.at) >= m.ttl:
			st, rev = s.state, s.rev
		default:
			continue // another member's, and alive
		}
		st.Owner = m.id
		sent := time.Now()
		newRev, err := m.put(context.Background(), p.key, st, rev)
		if err != nil {
			continue // someone was quicker, or the bucket is away; the watch tells what happened
		}
		m.take(p, st, newRev, sent)
		owned++
	}
}

// take makes p this member's, from position st, and starts reading it.
func (m *member) take(p *part, st partState, rev uint64, renewed time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.owned, p.gen, p.rev, p.renewed, p.state = true, p.gen+1, rev, renewed, st
	p.buf, p.inflight, p.notBefore, p.dirty = nil, nil, time.Time{}, false
	ctx, cancel := context.WithCancel(m.ctx)
	p.stop = cancel
	m.fetchers.Add(1)
	go m.fetch(ctx, p, p.gen, st.Seq)
}

// release gives p back to the group unless an event of it is being handled (then a later balance
// tries again); it reports whether it did.
func (m *member) release(p *part) bool {
	m.mu.Lock()
	if !p.owned || p.inflight != nil {
		m.mu.Unlock()
		return false
	}
	st, rev := p.state, p.rev
	m.dropLocked(p)
	m.mu.Unlock()
	st.Owner = ""
	if _, err := m.put(context.Background(), p.key, st, rev); err != nil && m.ctx.Err() == nil {
		m.l.log.Warn("giving a partition back to the consumer group failed; it moves when its lease expires", "group", m.group, "key", p.key, "err", err)
	}
	return true
}

// dropLocked stops reading p and handing out its events; an unacked delivery's ack is refused.
func (m *member) dropLocked(p *part) {
	if !p.owned {
		return
	}
	p.owned = false
	p.gen++
	p.stop()
	p.buf, p.inflight = nil, nil
}

// leave runs when the member stops: every partition goes back to the group with its position,
// within one kvTimeout in all; if the bucket does not answer, the leases expire instead.
func (m *member) leave() {
	m.cancel()
	m.fetchers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	var failed error
	for _, p := range m.parts {
		m.mu.Lock()
		owned, st, rev := p.owned, p.state, p.rev
		m.dropLocked(p)
		m.mu.Unlock()
		if owned && failed == nil {
			st.Owner = ""
			_, failed = m.put(ctx, p.key, st, rev)
		}
	}
	if failed != nil {
		m.l.log.Warn("giving partitions back to the consumer group failed; they move when their leases expire", "group", m.group, "err", failed)
		return
	}
	m.l.groups.Delete(ctx, m.memberKey())
}

// fetch reads p's events after seq into p.buf while p is this member's (generation gen).
func (m *member) fetch(ctx context.Context, p *part, gen int, after uint64) {
	defer m.fetchers.Done()
	for ctx.Err() == nil {
		err := m.fetchFrom(ctx, p, gen, &after)
		if ctx.Err() == nil {
			m.l.log.Warn("reading a partition of the event stream failed; retrying", "group", m.group, "subject", p.subject, "err", err)
			rookery.Sleep(ctx, 100*time.Millisecond)
		}
	}
}

func (m *member) fetchFrom(ctx context.Context, p *part, gen int, after *uint64) error {
	cons, err := m.l.js.OrderedConsumer(ctx, m.l.streamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{p.subject},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    *after + 1,
		// The client recreates the consumer after a gap or a lost server; by default forever, and
		// without looking at ctx. A few tries, then fetch decides (retry, or stop with ctx).
		MaxResetAttempts: 3,
	})
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch))
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		it.Stop() // also ends a reset in progress, at its next try
	}()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil || meta.Sequence.Stream <= *after {
			continue
		}
		*after = meta.Sequence.Stream
		f := fetched{seq: meta.Sequence.Stream}
		if f.ev, err = events.DecodeEvent(msg.Data()); err != nil {
			m.l.log.Error("skipping a message of the event stream that is not an event", "subject", p.subject, "seq", f.seq, "err", err)
			f.bad = true
		}
		m.mu.Lock()
		for p.gen == gen && len(p.buf) >= maxBuffered {
			m.mu.Unlock()
			select {
			case <-p.space:
			case <-ctx.Done():
				return nil
			}
			m.mu.Lock()
		}
		if p.gen != gen {
			m.mu.Unlock()
			return nil
		}
		p.buf = append(p.buf, f)
		m.readyLocked(p)
		m.mu.Unlock()
	}
}

// headReadyLocked reports whether p's head event can be handed out now.
func headReadyLocked(p *part) bool {
	return p.owned && p.inflight == nil && len(p.buf) > 0 && !time.Now().Before(p.notBefore)
}

// readyLocked queues p for a Next if its head event can be handed out now.
func (m *member) readyLocked(p *part) {
	if p.queued || !headReadyLocked(p) {
		return
	}
	p.queued = true
	m.ready = append(m.ready, p)
	select {
	case m.avail <- struct{}{}:
	default: // as many tokens as partitions are waiting already
	}
}

// next hands out the head event of the first ready partition to s, or returns nil.
func (m *member) next(s *subscription) *delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.ready) > 0 {
		p := m.ready[0]
		m.ready = m.ready[1:]
		p.queued = false
		if !headReadyLocked(p) {
			continue // changed since it was queued
		}
		if p.buf[0].bad {
			m.advanceLocked(p)
			continue
		}
		p.state.Attempts++
		p.dirty = true
		d := &delivery{s: s, p: p, gen: p.gen, seq: p.buf[0].seq, ev: p.buf[0].ev, attempt: p.state.Attempts}
		p.inflight = d
		s.held[d] = true
		d.timer = time.AfterFunc(s.ackWait, func() { m.expire(d) })
		return d
	}
	return nil
}

// advanceLocked moves p past its head event (acked, or skipped).
func (m *member) advanceLocked(p *part) {
	p.state.Seq = p.buf[0].seq
	p.state.Attempts = 0
	p.buf = p.buf[1:]
	p.dirty = true
	select {
	case p.space <- struct{}{}:
	default:
	}
	m.readyLocked(p)
}

// settleLocked ends d's hold on its partition; it reports false if d no longer holds it (it expired,
// its subscription closed, or the partition moved to another member).
func (m *member) settleLocked(d *delivery) bool {
	if !d.s.held[d] {
		return false
	}
	delete(d.s.held, d)
	d.timer.Stop()
	if d.p.gen != d.gen || d.p.inflight != d {
		return false
	}
	d.p.inflight = nil
	return true
}

func (m *member) expire(d *delivery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settleLocked(d) {
		m.readyLocked(d.p)
	}
}

// flushNow writes the positions of the owned partitions before it returns (Lag reads them).
func (m *member) flushNow(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case m.flushq <- reply:
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscription is one Subscribe's view of its group's member.
type subscription struct {
	m       *member
	ackWait time.Duration
	held    map[*delivery]bool // guarded by m.mu
	closed  bool               // guarded by m.mu
}

type delivery struct {
	s       *subscription
	p       *part
	gen     int
	seq     uint64
	ev      rookery.Event
	attempt int
	timer   *time.Timer
}

func (d *delivery) Event() rookery.Event { return d.ev }
func (d *delivery) Attempt() int         { return d.attempt }

// Next implements events.Subscription.
func (s *subscription) Next(ctx context.Context) (events.Delivery, error) {
	const op rookery.Op = "nats.Next"
	for {
		select {
		case <-ctx.Done():
			return nil, rookery.E(op, rookery.Unavailable, ctx.Err())
		case <-s.m.ctx.Done():
			return nil, rookery.E(op, rookery.Unavailable, "the subscription is closed")
		case <-s.m.avail:
		}
		if d := s.m.next(s); d != nil {
			return d, nil
		}
	}
}

// Ack implements events.Delivery. An ack after the ack wait, or after the partition moved to
// another member, is Conflict: the event is (or will be) delivered again.
func (d *delivery) Ack(ctx context.Context) error {
	m := d.s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.settleLocked(d) {
		return rookery.E("nats.Ack", rookery.Conflict, "the delivery expired and was delivered again")
	}
	m.advanceLocked(d.p)
	return nil
}

// Nak implements events.Delivery.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	m := d.s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.settleLocked(d) {
		return rookery.E("nats.Nak", rookery.Conflict, "the delivery expired and was delivered again")
	}
	p, gen := d.p, d.gen
	p.notBefore = time.Now().Add(delay)
	time.AfterFunc(delay, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if p.gen == gen {
			m.readyLocked(p)
		}
	})
	return nil
}

// Close implements events.Subscription: held deliveries are handed out again at once, and the last
// subscription of a group on this Log gives the group's partitions back.
func (s *subscription) Close() error {
	m := s.m
	m.mu.Lock()
	if s.closed {
		m.mu.Unlock()
		return nil
	}
	s.closed = true
	for d := range s.held {
		if m.settleLocked(d) {
			m.readyLocked(d.p)
		}
	}
	m.mu.Unlock()
	m.l.leave(m)
	return nil
}
