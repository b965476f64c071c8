// Package embedded is the default event log: a durable, partitioned log in the data directory, on a
// Pebble instance of its own, for single-node deployments (`rookery serve` with --events embedded).
//
// Layout (all keys start with a one-byte space):
//
//	'm' "partitions"                     -> be16 partition count (fixed at creation)
//	'e' be16(partition) be64(offset)     -> stored event (stored.go: the event and when it was appended)
//	'd' event id                         -> be16(partition) be64(offset)   (de-duplication; appended
//	                                        events only, not staged ones)
//	'o' group 0x00 be16(partition)       -> be64 next offset the group has not acked
//	'q' group 0x00 event id              -> dead letter (JSON)
//	'r' group 0x00 be64(time) event id   -> replayed event, delivered to that group only
//
// The log can live on an engine of its own (Options.Dir) or on the table store's (Options.Engine):
// its keys never start with the store's space bytes ('b', 'i', 't') or the timelines' ('h', 'f',
// 'g'; timeline/pebblestore). On the store's engine, the
// outbox's writes, the relay's appends and deletes and the consumers' writes share one write-ahead
// log, so concurrent commits share its syncs and the disk serves one log instead of two.
//
// Appends are synced before Append returns, but consumers may be handed an event as soon as it is
// committed, before its sync (so they do not wait for it). That is safe because the write-ahead log
// is a sequence: anything written after an append (a group's offset, a dead letter, a consumer's own
// write on the shared engine) cannot survive a crash the append did not; and an append lost in a
// crash had not returned, so its caller (the outbox relay, which deletes only what was appended)
// appends it again, and consumers, idempotent by contract, see it twice at most. Group offsets are
// committed without a sync: after a machine crash a group may be handed events it had acked again,
// which at-least-once allows.
//
// Invariant (under Log.mu): for every partition p, offsets first[p]..next[p]-1 are stored
// (committed, perhaps not yet synced; those below first[p] were trimmed, see trim.go), and every
// group's committed[p] is within first[p]..next[p]; a partition has at most one delivery in flight
// per group.
package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/pebblekit"
)

// Options configure a Log.
type Options struct {
	Dir      string // ignored when InMemory or with Engine
	InMemory bool
	// Engine, if set, is an open engine to keep the log in, shared with the table store
	// (table/pebble's DB.Engine). The log does not close it: close the log first, then the store.
	Engine *cpebble.DB
	// Partitions is the number of partitions of a new log (0 means 16); an existing log keeps the
	// count it was created with.
	Partitions int
	Clock      rookery.Clock // nil means the system clock
	Logger     *slog.Logger
	// Retain is how long an event stays after it was appended; after that it is deleted once every
	// group has acked it (trim.go says which groups count). 0 means 24 hours; negative keeps every
	// event.
	Retain time.Duration
	// TrimEvery is how often events past Retain are deleted; 0 means a minute, negative never
	// (call Trim).
	TrimEvery time.Duration
}

// Log is the embedded event log.
type Log struct {
	db     *cpebble.DB
	shared bool // db is Options.Engine: not the log's to close
	parts  int
	clock  rookery.Clock

	stop   chan struct{}  // closed by Close: the offset flusher and the trimmer end
	loops  sync.WaitGroup // the offset flusher and the trimmer
	retain time.Duration  // negative: keep every event
	trimMu sync.Mutex     // one Trim at a time

	// appendMu orders appends: offsets are reserved under it (reserved >= next), and ids being
	// appended are in inflight. lastPublished is closed when the latest append has published.
	appendMu      sync.Mutex
	reserved      []uint64
	inflight      map[string]bool
	lastPublished chan struct{}
	broken        error

	mu      sync.Mutex
	closed  bool
	next    []uint64
	first   []uint64 // per partition: the oldest offset not trimmed (a new group starts there)
	tails   []tail   // per partition: the latest events, so that groups keeping up read no engine
	groups  map[string]*group
	changed chan struct{} // closed and replaced whenever something a waiting Next may want changes
}

var _ events.Log = (*Log)(nil)

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
}

// partState is a group's delivery state of one partition.
type partState struct {
	inFlight    bool
	gen         uint64 // increases with every delivery; an ack of an older one is stale
	attempts    int
	deliveredAt time.Time
	ackWait     time.Duration
	notBefore   time.Time
	replayKey   []byte // for the replay queue: the key of the entry in flight
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

// Open opens (creating if needed) the log that opts describe.
func Open(opts Options) (*Log, error) {
	const op rookery.Op = "embedded.Open"
	if opts.Clock == nil {
		opts.Clock = rookery.SystemClock
	}
	if opts.Partitions <= 0 {
		opts.Partitions = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Every append looks its event ids up to de-duplicate them, and almost all are absent: the bloom
	// filters pebblekit sets answer those lookups without reading the sstables' index blocks.
	db := opts.Engine
	if db == nil {
		var err error
		db, err = pebblekit.Open(op, pebblekit.Config{Name: "the event log", Dir: opts.Dir, InMemory: opts.InMemory,
			CacheBytes: 64 << 20, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
	}
	if opts.Retain == 0 {
		opts.Retain = 24 * time.Hour
	}
	if opts.TrimEvery == 0 {
		opts.TrimEvery = time.Minute
	}
	l := &Log{db: db, shared: opts.Engine != nil, clock: opts.Clock, retain: opts.Retain, groups: map[string]*group{}, changed: make(chan struct{})}
	if err := l.load(opts.Partitions); err != nil {
		if !l.shared {
			db.Close()
		}
		return nil, rookery.E(op, rookery.Internal, err)
	}
	l.stop = make(chan struct{})
	l.loops.Add(1)
	go l.flushLoop(opts.Logger)
	if opts.TrimEvery > 0 && l.retain >= 0 {
		l.loops.Add(1)
		go l.trimLoop(opts.TrimEvery, opts.Logger)
	}
	return l, nil
}

// offsetFlushInterval is how often acked group offsets are written.
const offsetFlushInterval = 50 * time.Millisecond

func (l *Log) flushLoop(log *slog.Logger) {
	l.every(offsetFlushInterval, func() {
		l.mu.Lock()
		err := l.flushOffsetsLocked()
		l.mu.Unlock()
		if err != nil {
			log.Error("event log: writing group offsets failed", "err", err)
		}
	})
}

// every runs do every interval until Close; it is one of l.loops.
func (l *Log) every(interval time.Duration, do func()) {
	defer l.loops.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			do()
		}
	}
}

// flushOffsetsLocked writes the committed offsets of every group that acked since the last flush.
func (l *Log) flushOffsetsLocked() error {
	if l.closed {
		return nil
	}
	b := l.db.NewBatch()
	defer b.Close()
	var flushed []*group
	for _, g := range l.groups {
		if !g.dirty {
			continue
		}
		for p, off := range g.committed {
			if err := b.Set(offsetKey(g.name, p), binary.BigEndian.AppendUint64(nil, off), nil); err != nil {
				return err
			}
		}
		flushed = append(flushed, g)
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(cpebble.NoSync); err != nil {
		return err
	}
	for _, g := range flushed {
		g.dirty = false
	}
	return nil
}

// load reads the partition count (writing it for a new log) and each partition's next offset.
func (l *Log) load(parts int) error {
	mkey := []byte("mpartitions")
	v, closer, err := l.db.Get(mkey)
	switch err {
	case nil:
		parts = int(binary.BigEndian.Uint16(v))
		closer.Close()
	case cpebble.ErrNotFound:
		if err := l.db.Set(mkey, binary.BigEndian.AppendUint16(nil, uint16(parts)), cpebble.Sync); err != nil {
			return err
		}
	default:
		return err
	}
	l.parts = parts
	l.next = make([]uint64, parts)
	defer func() {
		l.reserved = append([]uint64(nil), l.next...)
		l.tails = make([]tail, parts)
		for p := range parts {
			l.tails[p].base = l.next[p]
		}
		l.inflight = map[string]bool{}
		l.lastPublished = make(chan struct{})
		close(l.lastPublished)
	}()
	l.first = make([]uint64, parts)
	for p := range parts {
		iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: eventKey(p, 0), UpperBound: eventKey(p+1, 0)})
		if err != nil {
			return err
		}
		if iter.Last() { // trims keep a partition's last event, so its next offset is known
			l.next[p] = binary.BigEndian.Uint64(iter.Key()[3:]) + 1
		}
		if iter.First() {
			l.first[p] = binary.BigEndian.Uint64(iter.Key()[3:])
		}
		if err := iter.Close(); err != nil {
			return err
		}
	}
	return nil
}

func eventKey(p int, off uint64) []byte {
	b := append([]byte{'e'}, byte(p>>8), byte(p))
	return binary.BigEndian.AppendUint64(b, off)
}

func groupKey(space byte, group string) []byte {
	return append(append([]byte{space}, group...), 0x00)
}

func offsetKey(group string, p int) []byte {
	return append(groupKey('o', group), byte(p>>8), byte(p))
}

func (l *Log) partition(key string) int { return events.Partition(key, l.parts) }

// broadcastLocked wakes every waiting Next.
func (l *Log) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func checkGroup(op rookery.Op, group string) error {
	if !rookery.ValidUserID(group) { // the same alphabet: [A-Za-z0-9_-], 1..64
		return rookery.E(op, rookery.Invalid, "a group name is 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	return nil
}

// Append implements events.Log.
//
// Appends run concurrently: each reserves its offsets under appendMu (de-duplicating against the
// log and against appends in flight), commits its batch with no lock held, publishes its offsets in
// reservation order, so that a reader never sees an offset whose event is not committed, and then
// waits for the sync (which concurrent appends and, on a shared engine, the store's writes share).
// Consumers may see the events before the sync; the package comment says why that is safe.
// Staged events (stage.go) take the same way, in the store's transactions.
func (l *Log) Append(ctx context.Context, evs []rookery.Event) error {
	const op rookery.Op = "embedded.Append"
	for _, ev := range evs {
		if ev.ID == "" || ev.Type == "" || ev.Key == "" {
			return rookery.E(op, rookery.Invalid, "an event needs an id, a type and a key")
		}
	}
	if err := ctx.Err(); err != nil {
		return rookery.E(op, rookery.Unavailable, err)
	}
	b := l.db.NewBatch()
	defer b.Close()
	header := appendStoredHeader(nil, l.clock.Now().UnixNano(), true)

	l.appendMu.Lock()
	if l.broken != nil {
		l.appendMu.Unlock()
		return rookery.E(op, rookery.Internal, "the event log failed earlier", l.broken)
	}
	var ids []string
	var added []appended
	for _, ev := range evs {
		if l.inflight[ev.ID] {
			continue
		}
		if _, closer, err := l.db.Get(dedupKey(ev.ID)); err == nil {
			closer.Close()
			continue // appended before
		} else if err != cpebble.ErrNotFound {
			l.appendMu.Unlock()
			l.release(ids)
			return rookery.E(op, rookery.Internal, err)
		}
		val, err := events.AppendEvent(bytes.Clone(header), ev)
		if err != nil {
			l.appendMu.Unlock()
			l.release(ids)
			return rookery.E(op, err) // Invalid: the payload is not JSON
		}
		added = append(added, appended{p: l.partition(ev.Key), id: ev.ID, val: val, dedup: true})
		l.inflight[ev.ID] = true
		ids = append(ids, ev.ID)
	}
	if len(ids) == 0 {
		l.appendMu.Unlock()
		return nil
	}
	pub, err := l.reserveLocked(b, added)
	l.appendMu.Unlock()
	if err == nil {
		err = b.Commit(cpebble.NoSync)
		l.publish(pub, err)
	}
	if err == nil {
		// Syncing the write-ahead log makes this batch durable, and everything committed before it.
		err = l.db.LogData(nil, cpebble.Sync)
		if err != nil {
			l.appendMu.Lock()
			l.broken = err // published but perhaps not durable: stop before anything builds on it
			l.appendMu.Unlock()
		}
	}
	l.release(ids)
	if err != nil {
		return rookery.E(op, rookery.Internal, "append failed", err)
	}
	return nil
}

func dedupKey(id string) []byte { return append([]byte{'d'}, id...) }

// appended is an event being appended: its partition, id, stored value and whether it gets a
// de-duplication key; its event as a read would decode it (ok false if not decoded yet or if it
// does not decode); then its offset.
type appended struct {
	p     int
	id    string
	val   []byte
	dedup bool
	ev    rookery.Event
	ok    bool
	off   uint64
}

// publication is an append between reserving its offsets and publishing them.
type publication struct {
	added      []appended
	upTo       []uint64 // every partition's reserved offsets, as of this append
	prev, done chan struct{}
}

// reserveLocked (appendMu held) gives each of added the next offset of its partition and adds it
// to b (with its de-duplication key if it has one); the caller commits b and then
// calls publish, whatever the outcome.
func (l *Log) reserveLocked(b *cpebble.Batch, added []appended) (*publication, error) {
	for i := range added {
		a := &added[i]
		a.off = l.reserved[a.p]
		l.reserved[a.p]++
		ek := eventKey(a.p, a.off)
		if err := b.Set(ek, a.val, nil); err != nil {
			l.broken = err // a hole at the offsets reserved: see publish
			return nil, err
		}
		if !a.ok { // the tails hold the events as a read from the engine returns them
			if st, err := decodeStored(a.val); err == nil {
				a.ev, a.ok = st.Event, true
			}
		}
		if a.dedup {
			if err := b.Set(dedupKey(a.id), ek[1:], nil); err != nil {
				l.broken = err
				return nil, err
			}
		}
	}
	pub := &publication{added: added, upTo: slices.Clone(l.reserved), prev: l.lastPublished, done: make(chan struct{})}
	l.lastPublished = pub.done
	return pub, nil
}

// publish makes a committed append's events visible to readers, after every append reserved
// before it; err is the commit's outcome. A failed commit leaves its reserved offsets a hole that
// readers must never reach, so the log refuses further appends (a failed synced commit means the
// disk is failing).
func (l *Log) publish(pub *publication, err error) {
	<-pub.prev
	l.mu.Lock()
	if err == nil {
		for p, n := range pub.upTo {
			l.next[p] = max(l.next[p], n)
		}
		for _, a := range pub.added {
			if a.ok { // else the next push starts the tail again past it, and reads go to the engine
				l.tails[a.p].push(a.off, a.ev)
			}
		}
		l.broadcastLocked()
	}
	l.mu.Unlock()
	if err != nil {
		l.appendMu.Lock()
		l.broken = err
		l.appendMu.Unlock()
	}
	close(pub.done)
}

// release forgets that ids are being appended.
func (l *Log) release(ids []string) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	for _, id := range ids {
		delete(l.inflight, id)
	}
}

// Subscribe implements events.Log.
func (l *Log) Subscribe(ctx context.Context, name string, opts events.SubscribeOptions) (events.Subscription, error) {
	const op rookery.Op = "embedded.Subscribe"
	if err := checkGroup(op, name); err != nil {
		return nil, err
	}
	if opts.AckWait <= 0 {
		opts.AckWait = events.DefaultAckWait
	}
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
	g := &group{name: name, committed: make([]uint64, l.parts), parts: make([]partState, l.parts+1), ahead: make([][]rookery.Event, l.parts)}
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
}

type delivery struct {
	s       *subscription
	part    int
	gen     uint64
	ev      rookery.Event
	attempt int
}

func (d *delivery) Event() rookery.Event { return d.ev }
func (d *delivery) Attempt() int         { return d.attempt }

// Next implements events.Subscription.
func (s *subscription) Next(ctx context.Context) (events.Delivery, error) {
	const op rookery.Op = "embedded.Next"
	for {
		s.l.mu.Lock()
		if s.l.closed || s.closed {
			s.l.mu.Unlock()
			return nil, rookery.E(op, rookery.Unavailable, "the subscription or the log is closed")
		}
		wake := s.l.changed
		d, wait, err := s.pickLocked(s.l.clock.Now())
		s.l.mu.Unlock()
		if err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		if d != nil {
			return d, nil
		}
		// Wait for a change, for the earliest retry or ack deadline, or at most 100 ms (a clock
		// under test may move without waking anyone).
		timer := time.NewTimer(min(wait, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, rookery.E(op, rookery.Unavailable, ctx.Err())
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
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
		if ps.inFlight {
			deadline := ps.deliveredAt.Add(ps.ackWait)
			if now.Before(deadline) {
				wait = min(wait, deadline.Sub(now))
				continue
			}
			ps.inFlight = false // the consumer is presumed dead: deliver again
		}
		if now.Before(ps.notBefore) {
			wait = min(wait, ps.notBefore.Sub(now))
			continue
		}
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
		return &delivery{s: s, part: p, gen: ps.gen, ev: ev, attempt: ps.attempts}, 0, nil
	}
	return nil, wait, nil
}

// headLocked returns the group's next event of partition p (p == parts: the replay queue).
func (l *Log) headLocked(g *group, p int) (rookery.Event, []byte, bool, error) {
	if p < l.parts {
		if g.committed[p] >= l.next[p] {
			return rookery.Event{}, nil, false, nil
		}
		if len(g.ahead[p]) == 0 {
			evs, err := l.readLocked(p, g.committed[p], readAhead)
			if err != nil {
				return rookery.Event{}, nil, false, err
			}
			g.ahead[p] = evs
		}
		return g.ahead[p][0], nil, true, nil
	}
	if g.noReplays {
		return rookery.Event{}, nil, false, nil
	}
	prefix := groupKey('r', g.name)
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

func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
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
	ps.inFlight, ps.attempts, ps.notBefore, ps.replayKey = false, 0, time.Time{}, nil
	delete(d.s.held, d.part)
	l.broadcastLocked()
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
	ps.inFlight = false
	ps.notBefore = l.clock.Now().Add(delay)
	delete(d.s.held, d.part)
	l.broadcastLocked()
	return nil
}

// Close implements events.Subscription: what it holds is delivered again at once.
func (s *subscription) Close() error {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, gen := range s.held {
		if ps := &s.g.parts[p]; ps.inFlight && ps.gen == gen {
			ps.inFlight = false
		}
	}
	s.held, s.closed = map[int]uint64{}, true
	if !l.closed {
		l.broadcastLocked()
	}
	return nil
}

// DeadLetter implements events.Log.
func (l *Log) DeadLetter(ctx context.Context, group string, d events.DeadLetter) error {
	const op rookery.Op = "embedded.DeadLetter"
	if err := checkGroup(op, group); err != nil {
		return err
	}
	val, err := json.Marshal(d)
	if err != nil {
		return rookery.E(op, rookery.Invalid, err)
	}
	return l.write(op, func(b *cpebble.Batch) error {
		return b.Set(append(groupKey('q', group), d.Event.ID...), val, nil)
	})
}

// write commits one synced batch built by fill, unless the log is closed.
func (l *Log) write(op rookery.Op, fill func(b *cpebble.Batch) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	b := l.db.NewBatch()
	defer b.Close()
	if err := fill(b); err != nil {
		return err
	}
	if err := b.Commit(cpebble.Sync); err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	l.broadcastLocked()
	return nil
}

// DeadLetters implements events.Log.
func (l *Log) DeadLetters(ctx context.Context, group, after string, limit int) ([]events.DeadLetter, error) {
	const op rookery.Op = "embedded.DeadLetters"
	if err := checkGroup(op, group); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	prefix := groupKey('q', group)
	lower := prefix
	if after != "" {
		lower = append(append(bytes.Clone(prefix), after...), 0x00)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	defer iter.Close()
	var out []events.DeadLetter
	for ok := iter.First(); ok && len(out) < limit; ok = iter.Next() {
		var d events.DeadLetter
		if err := json.Unmarshal(iter.Value(), &d); err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetterByID implements events.Log.
func (l *Log) DeadLetterByID(ctx context.Context, group, id string) (events.DeadLetter, error) {
	const op rookery.Op = "embedded.DeadLetterByID"
	if err := checkGroup(op, group); err != nil {
		return events.DeadLetter{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return events.DeadLetter{}, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	v, closer, err := l.db.Get(append(groupKey('q', group), id...))
	if err == cpebble.ErrNotFound {
		return events.DeadLetter{}, rookery.E(op, rookery.NotFound, "no such dead letter")
	}
	if err != nil {
		return events.DeadLetter{}, rookery.E(op, rookery.Internal, err)
	}
	defer closer.Close()
	var d events.DeadLetter
	if err := json.Unmarshal(v, &d); err != nil {
		return events.DeadLetter{}, rookery.E(op, rookery.Internal, err)
	}
	return d, nil
}

// Replay implements events.Log.
func (l *Log) Replay(ctx context.Context, group, id string) error {
	const op rookery.Op = "embedded.Replay"
	if err := checkGroup(op, group); err != nil {
		return err
	}
	qkey := append(groupKey('q', group), id...)
	return l.write(op, func(b *cpebble.Batch) error {
		v, closer, err := l.db.Get(qkey)
		if err == cpebble.ErrNotFound {
			return rookery.E(op, rookery.NotFound, "no such dead letter")
		}
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		var d events.DeadLetter
		err = json.Unmarshal(v, &d)
		closer.Close()
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		ev, _ := json.Marshal(d.Event)
		rkey := binary.BigEndian.AppendUint64(groupKey('r', group), uint64(l.clock.Now().UnixNano()))
		if err := b.Set(append(rkey, id...), ev, nil); err != nil {
			return err
		}
		if g := l.groups[group]; g != nil {
			g.noReplays = false // l.write holds l.mu
		}
		return b.Delete(qkey, nil)
	})
}

// Drop implements events.Log.
func (l *Log) Drop(ctx context.Context, group, id string) error {
	const op rookery.Op = "embedded.Drop"
	if err := checkGroup(op, group); err != nil {
		return err
	}
	qkey := append(groupKey('q', group), id...)
	return l.write(op, func(b *cpebble.Batch) error {
		if _, closer, err := l.db.Get(qkey); err == cpebble.ErrNotFound {
			return rookery.E(op, rookery.NotFound, "no such dead letter")
		} else if err != nil {
			return rookery.E(op, rookery.Internal, err)
		} else {
			closer.Close()
		}
		return b.Delete(qkey, nil)
	})
}

// Lag implements events.Log.
func (l *Log) Lag(ctx context.Context, name string) (int64, time.Time, error) {
	const op rookery.Op = "embedded.Lag"
	if err := checkGroup(op, name); err != nil {
		return 0, time.Time{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, time.Time{}, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	g, err := l.groupLocked(name)
	if err != nil {
		return 0, time.Time{}, rookery.E(op, rookery.Internal, err)
	}
	var n int64
	var oldest time.Time
	for p := range l.parts {
		behind := l.next[p] - g.committed[p]
		if behind == 0 {
			continue
		}
		n += int64(behind)
		v, closer, err := l.db.Get(eventKey(p, g.committed[p]))
		if err != nil {
			return 0, time.Time{}, rookery.E(op, rookery.Internal, err)
		}
		st, err := decodeStored(v)
		closer.Close()
		if err != nil {
			return 0, time.Time{}, rookery.E(op, rookery.Internal, err)
		}
		if at := time.Unix(0, st.AppendedAt); oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	return n, oldest, nil
}

// Ping implements events.Log.
func (l *Log) Ping(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return rookery.E(rookery.Op("embedded.Ping"), rookery.Unavailable, "the event log is closed")
	}
	return nil
}

// SharesEngine reports whether the log lives in db (Options.Engine): then its consumer offsets are
// written to db's write-ahead log after everything their handlers wrote to db before acking.
func (l *Log) SharesEngine(db *cpebble.DB) bool { return l.shared && l.db == db }

// Close implements events.Log.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	close(l.stop)
	l.mu.Unlock()
	l.loops.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	ferr := l.flushOffsetsLocked()
	l.closed = true
	l.broadcastLocked()
	var cerr error
	if !l.shared {
		cerr = l.db.Close()
	}
	if err := errors.Join(ferr, cerr); err != nil {
		return rookery.E(rookery.Op("embedded.Close"), rookery.Internal, err)
	}
	return nil
}
