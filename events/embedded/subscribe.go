package embedded

// Subscriptions: consumer groups, their partitions' delivery state and the in-memory tail of recent
// events, deliveries, acks and naks.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/pebblekit"
)

type group struct {
	name      string
	committed []uint64
	parts     []partState // one per partition, plus one for the replay queue (the last)
	// ahead[p] holds the events of partition p from offset committed[p] on, read ahead in one scan
	// so that a delivery costs no read of its own.
	ahead [][]rookery.Event
	dirty bool // committed offsets not yet written
	// noReplays is set when the group's replay queue was found empty and cleared by Replay, so
	// that looking for work does not scan the queue again and again.
	noReplays bool
	// signal wakes one of the group's waiting Nexts (wake).
	signal chan struct{}
	// types are the event types the group receives (Options.Groups); nil: every type.
	types map[string]bool
}

// receives tells whether the group receives events of type typ.
func (g *group) receives(typ string) bool { return g.types == nil || g.types[typ] }

// wake wakes one waiting Next of the group, or the next to wait if none waits. One is enough: a
// Next that finds a delivery wakes another in turn only if another partition is ready too, and an
// ack only if its partition has more, so that no waiter is woken to find nothing. Waking every
// waiter of every group on each append and ack (as a broadcast would) cost more CPU than some
// handlers at a thousand posts a second.
func (g *group) wake() {
	select {
	case g.signal <- struct{}{}:
	default:
	}
}

// partState is a group's delivery state of one partition.
type partState struct {
	inFlight    bool
	gen         uint64 // increases with every delivery; an ack of an older one is stale
	attempts    int
	deliveredAt time.Time
	ackWait     time.Duration
	notBefore   time.Time
	replayKey   []byte    // for the replay queue: the key of the entry in flight
	current     *delivery // the delivery in flight, while one is
}

// tail is a partition's latest appended events, up to its next offset, kept in memory as they are
// published: a group that keeps up reads them from here instead of opening an engine iterator (one
// per delivery per group), and every group shares one decoding of them.
type tail struct {
	base uint64          // the offset of evs[0]
	evs  []rookery.Event // the events at offsets base, base+1, ..., at most up to next-1
}

// tailMax is how many events a partition's tail keeps (half are dropped when it is passed).
const tailMax = 1024

// push adds the event at offset off, which follows the last one (else the tail starts again at off).
func (t *tail) push(off uint64, ev rookery.Event) {
	if off != t.base+uint64(len(t.evs)) {
		t.base, t.evs = off, nil
	}
	t.evs = append(t.evs, ev)
	if len(t.evs) > tailMax {
		drop := len(t.evs) - tailMax/2
		t.base += uint64(drop)
		t.evs = slices.Clone(t.evs[drop:])
	}
}

// read returns up to n events from offset from on, if the tail holds from.
func (t *tail) read(from uint64, n int) ([]rookery.Event, bool) {
	if from < t.base || from >= t.base+uint64(len(t.evs)) {
		return nil, false
	}
	i := int(from - t.base)
	return slices.Clip(t.evs[i:min(len(t.evs), i+n)]), true
}

// Subscribe implements events.Log.
func (l *Log) Subscribe(ctx context.Context, name string, opts events.SubscribeOptions) (events.Subscription, error) {
	const op rookery.Op = "embedded.Subscribe"
	if err := events.CheckGroup(op, name); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	g, err := l.groupLocked(name)
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	return &subscription{l: l, g: g, opts: opts, held: map[int]uint64{}}, nil
}

// groupLocked returns the state of group name, loading its committed offsets on first use.
func (l *Log) groupLocked(name string) (*group, error) {
	if g, ok := l.groups[name]; ok {
		return g, nil
	}
	g := &group{name: name, committed: make([]uint64, l.parts), parts: make([]partState, l.parts+1), ahead: make([][]rookery.Event, l.parts), signal: make(chan struct{}, 1), types: l.receives[name]}
	for p := range l.parts {
		v, closer, err := l.db.Get(offsetKey(name, p))
		if err == cpebble.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		g.committed[p] = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	for p := range l.parts {
		// A new group starts at the oldest event kept; so does one whose acked events a trim took
		// after a crash lost its latest offsets (it had acked them).
		g.committed[p] = max(g.committed[p], l.first[p])
	}
	l.groups[name] = g
	return g, nil
}

type subscription struct {
	l    *Log
	g    *group
	opts events.SubscribeOptions
	// held maps the partitions this subscription has a delivery in flight on to that delivery's gen.
	held   map[int]uint64
	rr     int
	closed bool
	// waits is the timer Next waits on, made once: one goroutine calls a subscription's Next
	// (events.Runner), and a channel made for every wait was a visible share of the consumers'
	// CPU. waiting guards it: a Next that finds it taken makes a timer of its own.
	waits   *time.Timer
	waiting atomic.Bool
}

type delivery struct {
	s       *subscription
	part    int
	gen     uint64
	ev      rookery.Event
	attempt int
	first   bool // the event's first delivery to the group (First)
	// superseded is set when the event is handed out again while this delivery is in flight.
	superseded atomic.Bool
}

var _ events.FirstDelivery = (*delivery)(nil)

func (d *delivery) Event() rookery.Event { return d.ev }

// First implements events.FirstDelivery: the event was appended since the log opened (no process
// before this one delivered it), this is its first delivery to the group (a retry, a delivery
// after an ack wait passed or a subscription closed, and a replay are not), and it was not handed
// out again since. It takes no lock: the Runner asks it for every delivery.
func (d *delivery) First() bool { return d.first && !d.superseded.Load() }

func (d *delivery) Attempt() int { return d.attempt }

// Next implements events.Subscription.
func (s *subscription) Next(ctx context.Context) (events.Delivery, error) {
	const op rookery.Op = "embedded.Next"
	for {
		s.l.mu.Lock()
		if s.l.closed || s.closed {
			s.l.mu.Unlock()
			s.g.wake() // the wake may have been meant for another subscription's Next
			return nil, rookery.E(op, rookery.Unavailable, "the subscription or the log is closed")
		}
		now := s.l.clock.Now()
		d, wait, err := s.pickLocked(now)
		more := d != nil && s.readyLocked(now)
		s.l.mu.Unlock()
		if err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		if d != nil {
			if more {
				s.g.wake()
			}
			return d, nil
		}
		// Wait for a change (every change that may make a delivery ready wakes the group), or for
		// the earliest retry or ack deadline, looking again at least every idlePoll.
		timer, own := s.timer(min(wait, s.l.idlePoll))
		select {
		case <-ctx.Done():
			s.release(timer, own)
			return nil, rookery.E(op, rookery.Unavailable, ctx.Err())
		case <-s.g.signal:
		case <-s.l.done:
		case <-timer.C:
		}
		s.release(timer, own)
	}
}

// timer returns a timer that fires after d: the subscription's own (own) unless another Next has
// it, then one of its own. (Since Go 1.23 Stop and Reset leave no stale tick in the channel.)
func (s *subscription) timer(d time.Duration) (t *time.Timer, own bool) {
	if !s.waiting.CompareAndSwap(false, true) {
		return time.NewTimer(d), false
	}
	if s.waits == nil {
		s.waits = time.NewTimer(d)
	} else {
		s.waits.Reset(d)
	}
	return s.waits, true
}

// release stops t, handed out by timer, and gives the subscription's own back.
func (s *subscription) release(t *time.Timer, own bool) {
	t.Stop()
	if own {
		s.waiting.Store(false)
	}
}

// pickLocked hands out the next ready event of any partition of the group that has none in
// flight, or returns how long to wait before one may be ready.
func (s *subscription) pickLocked(now time.Time) (*delivery, time.Duration, error) {
	l, g := s.l, s.g
	wait := time.Hour
	n := l.parts + 1
	for i := range n {
		p := (s.rr + i) % n
		ps := &g.parts[p]
		if d := ps.busyFor(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		if ps.inFlight { // the consumer is presumed dead: deliver again
			ps.current.superseded.Store(true)
		}
		ps.inFlight = false
		ev, replayKey, ok, err := l.headLocked(g, p)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			continue
		}
		ps.inFlight, ps.deliveredAt, ps.ackWait, ps.replayKey = true, now, s.opts.AckWait, replayKey
		ps.gen++
		ps.attempts++
		s.held[p] = ps.gen
		s.rr = (p + 1) % n
		d := &delivery{s: s, part: p, gen: ps.gen, ev: ev, attempt: ps.attempts}
		// Appended since the log opened (no process before this one delivered it) and delivered
		// for the first time (not a retry, nor again after an ack wait or a closed subscription).
		d.first = p < l.parts && ps.attempts == 1 && g.committed[p] >= l.opened[p]
		ps.current = d
		return d, 0, nil
	}
	return nil, wait, nil
}

// busyFor is how long the partition hands out nothing from now: until the ack wait of its delivery
// in flight passes, or until its retry is due; 0 if it may hand out its next event now.
func (ps *partState) busyFor(now time.Time) time.Duration {
	if ps.inFlight {
		return max(0, ps.deliveredAt.Add(ps.ackWait).Sub(now))
	}
	return max(0, ps.notBefore.Sub(now))
}

// readyLocked tells whether a partition of the group may have an event to hand out now: it is not
// busy and has events past its committed offset (the replay queue: is not known to be empty).
func (s *subscription) readyLocked(now time.Time) bool {
	l, g := s.l, s.g
	for p := range g.parts {
		if g.parts[p].busyFor(now) > 0 {
			continue
		}
		if p < l.parts && g.committed[p] < l.next[p] || p == l.parts && !g.noReplays {
			return true
		}
	}
	return false
}

// headLocked returns the group's next event of partition p (p == parts: the replay queue),
// passing over the events before it of types the group does not receive (nothing of p is in
// flight: they are acked as they are passed).
func (l *Log) headLocked(g *group, p int) (rookery.Event, []byte, bool, error) {
	if p < l.parts {
		for g.committed[p] < l.next[p] {
			if len(g.ahead[p]) == 0 {
				evs, err := l.readLocked(p, g.committed[p], readAhead)
				if err != nil {
					return rookery.Event{}, nil, false, err
				}
				g.ahead[p] = evs
			}
			if ev := g.ahead[p][0]; g.receives(ev.Type) {
				return ev, nil, true, nil
			}
			g.committed[p]++
			g.ahead[p] = g.ahead[p][1:]
			g.dirty = true
		}
		return rookery.Event{}, nil, false, nil
	}
	if g.noReplays {
		return rookery.Event{}, nil, false, nil
	}
	prefix := groupKey(pebblekit.LogReplayed, g.name)
	iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return rookery.Event{}, nil, false, err
	}
	defer iter.Close()
	if !iter.First() {
		g.noReplays = iter.Error() == nil
		return rookery.Event{}, nil, false, iter.Error()
	}
	var ev rookery.Event
	if err := json.Unmarshal(iter.Value(), &ev); err != nil {
		return rookery.Event{}, nil, false, err
	}
	return ev, bytes.Clone(iter.Key()), true, nil
}

// readAhead is how many events of a partition a group reads in one scan.
const readAhead = 256

// readLocked returns up to n stored events of partition p from offset from on.
func (l *Log) readLocked(p int, from uint64, n int) ([]rookery.Event, error) {
	if evs, ok := l.tails[p].read(from, n); ok {
		return evs, nil
	}
	iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: eventKey(p, from), UpperBound: eventKey(p, l.next[p])})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var evs []rookery.Event
	for ok := iter.First(); ok && len(evs) < n; ok = iter.Next() {
		st, err := decodeStored(iter.Value())
		if err != nil {
			return nil, err
		}
		evs = append(evs, st.Event)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("event log: partition %d has no event at offset %d", p, from)
	}
	return evs, iter.Error()
}

// Ack implements events.Delivery. Acking a delivery that was already delivered again (its ack
// wait passed) is Conflict: the event belongs to the newer delivery now.
func (d *delivery) Ack(ctx context.Context) error {
	const op rookery.Op = "embedded.Ack"
	l, g := d.s.l, d.s.g
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := &g.parts[d.part]
	if l.closed {
		return rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	if !ps.inFlight || ps.gen != d.gen {
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	if d.part < l.parts {
		// Committed in memory now and written by the flusher within offsetFlushInterval: a crash
		// in between delivers these events again, which at-least-once allows.
		g.committed[d.part]++
		if len(g.ahead[d.part]) > 0 {
			g.ahead[d.part] = g.ahead[d.part][1:]
		}
		g.dirty = true
	} else if err := l.db.Delete(ps.replayKey, cpebble.Sync); err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	ps.inFlight, ps.attempts, ps.notBefore, ps.replayKey, ps.current = false, 0, time.Time{}, nil, nil
	delete(d.s.held, d.part)
	if d.part < l.parts && g.committed[d.part] < l.next[d.part] || d.part == l.parts {
		g.wake() // the partition has more (the replay queue may)
	}
	return nil
}

// Nak implements events.Delivery.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	const op rookery.Op = "embedded.Nak"
	l, g := d.s.l, d.s.g
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := &g.parts[d.part]
	if !ps.inFlight || ps.gen != d.gen {
		return rookery.E(op, rookery.Conflict, "the delivery expired and was delivered again")
	}
	ps.inFlight, ps.current = false, nil
	ps.notBefore = l.clock.Now().Add(delay)
	delete(d.s.held, d.part)
	g.wake()
	return nil
}

// Close implements events.Subscription: what it holds is delivered again at once.
func (s *subscription) Close() error {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, gen := range s.held {
		if ps := &s.g.parts[p]; ps.inFlight && ps.gen == gen {
			ps.current.superseded.Store(true)
			ps.inFlight, ps.current = false, nil
		}
	}
	s.held, s.closed = map[int]uint64{}, true
	s.g.wake()
	return nil
}
