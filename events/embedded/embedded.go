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
// its spaces are its own (internal/pebblekit declares every owner's). On the store's engine, the
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
	"errors"
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
	// Groups names the event types consumer groups receive (as SNS filter policies do for the SQS
	// log); a group not named, or named with nil, receives every type. A group passes over the
	// events of other types as it reaches them, without a delivery: no worker is woken for them.
	Groups map[string][]string
}

// Log is the embedded event log.
type Log struct {
	db     *cpebble.DB
	shared bool // db is Options.Engine: not the log's to close
	parts  int
	clock  rookery.Clock
	// idlePoll is how often a waiting Next looks for work no one woke it for: a wall clock's
	// deadlines are waited for exactly, and every change wakes the group, so its poll is only a
	// safety net (idle subscriptions, a hundred or more in a server, cost CPU with each look); a
	// test's clock may move without waking anyone.
	idlePoll time.Duration

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

	mu     sync.Mutex
	closed bool
	next   []uint64
	first  []uint64 // per partition: the oldest offset not trimmed (a new group starts there)
	// opened is each partition's next offset when the log opened: the events from there on were
	// appended by this process, and none was delivered before it started (delivery.First).
	opened []uint64
	tails  []tail // per partition: the latest events, so that groups keeping up read no engine
	groups map[string]*group
	done   chan struct{} // closed when the log is
	// receives maps a group named in Options.Groups to the event types it receives.
	receives map[string]map[string]bool
}

var _ events.Log = (*Log)(nil)

// Open opens (creating if needed) the log that opts describe.
func Open(opts Options) (*Log, error) {
	const op rookery.Op = "embedded.Open"
	idlePoll := 100 * time.Millisecond
	if opts.Clock == nil {
		opts.Clock, idlePoll = rookery.SystemClock, time.Second
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
	l := &Log{db: db, shared: opts.Engine != nil, clock: opts.Clock, idlePoll: idlePoll, retain: opts.Retain, groups: map[string]*group{}, done: make(chan struct{}),
		receives: map[string]map[string]bool{}}
	for g, types := range opts.Groups {
		if types == nil {
			continue // every type
		}
		l.receives[g] = map[string]bool{}
		for _, t := range types {
			l.receives[g][t] = true
		}
	}
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
	mkey := append([]byte{pebblekit.LogMeta}, "partitions"...)
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
		l.opened = append([]uint64(nil), l.next...)
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

func (l *Log) partition(key string) int { return events.Partition(key, l.parts) }

// wakeGroupsLocked wakes a waiting Next of every group (group.wake says why one is enough).
func (l *Log) wakeGroupsLocked() {
	for _, g := range l.groups {
		g.wake()
	}
}

// announceLocked tells every group of events just published. A group that has acked everything
// before such an event (nothing is in flight on its partition then) and does not receive its type
// passes over it at once; for any other, a waiting Next of the group is woken (group.wake says why
// one is enough), and it passes over what it does not receive when it gets there (headLocked).
func (l *Log) announceLocked(added []appended) {
	for _, g := range l.groups {
		wake := false
		for _, a := range added {
			if a.ok && g.committed[a.p] == a.off && !g.receives(a.ev.Type) {
				g.committed[a.p]++
				g.dirty = true
				continue
			}
			wake = true
		}
		if wake {
			g.wake()
		}
	}
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
		l.announceLocked(pub.added)
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

// Lag implements events.Log.
func (l *Log) Lag(ctx context.Context, name string) (int64, time.Time, error) {
	const op rookery.Op = "embedded.Lag"
	if err := events.CheckGroup(op, name); err != nil {
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

// Checkpoint writes a consistent copy of the log's own engine to dir (see table/pebble's
// DB.Checkpoint); a log in the store's engine is in the store's checkpoint instead.
func (l *Log) Checkpoint(dir string) error {
	const op rookery.Op = "embedded.Checkpoint"
	if l.shared {
		return rookery.E(op, rookery.Invalid, "the log is in the store's engine: checkpoint the store")
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	if err := l.db.Checkpoint(dir, cpebble.WithFlushedWAL()); err != nil {
		return rookery.E(op, rookery.Internal, err)
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
	close(l.done)
	var cerr error
	if !l.shared {
		cerr = l.db.Close()
	}
	if err := errors.Join(ferr, cerr); err != nil {
		return rookery.E(rookery.Op("embedded.Close"), rookery.Internal, err)
	}
	return nil
}
