// Package pebble is the embedded table backend: table.Table on CockroachDB's Pebble, an LSM key-value
// store in the data directory. It is Rookery's default, and serves a single-node deployment whole.
//
// Writes are atomic per call: an item, its index entries and its TTL entry go into one Pebble batch.
// Acknowledged writes are durable: every batch is committed with a synced WAL, and Pebble's commit
// pipeline shares one fsync among all the batches that arrive while the previous sync is running
// (group commit), so many concurrent writers cost few syncs.
//
// Conditions are evaluated under a lock on the item's key (locks.go), so read-check-write is atomic
// against every other write to the same key; a transaction takes the locks of all its keys in key
// order, so transactions cannot deadlock.
package pebble

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/keylock"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/table"
)

// Options configure a DB.
type Options struct {
	// Dir is the directory that holds the database; ignored when InMemory.
	Dir string
	// InMemory keeps everything in memory (tests): nothing survives Close.
	InMemory bool
	// FS, if set, is the file system Dir is in (tests: one that can simulate a crash).
	FS vfs.FS
	// Schema names the secondary indexes.
	Schema table.Schema
	// Clock decides TTL expiry. Required.
	Clock rookery.Clock
	// CursorKey signs query cursors. Required.
	CursorKey []byte
	// SweepInterval is how often expired items are removed in the background; 0 means one minute,
	// and a negative value disables the sweeper (call Sweep instead).
	SweepInterval time.Duration
	// CacheBytes is the block cache size; 0 means 128 MiB.
	CacheBytes int64
	// WALSyncInterval is the least time between two syncs of the write-ahead log (on disk): 0
	// means pebblekit.DefaultWALSyncInterval, a negative value syncs as soon as a commit asks.
	WALSyncInterval time.Duration
	// Logger receives background errors; nil means slog.Default().
	Logger *slog.Logger
}

// DB is a table.Table stored in Pebble.
type DB struct {
	db      *cpebble.DB
	schema  table.Schema
	clock   rookery.Clock
	cursors *table.Cursors
	log     *slog.Logger
	locks   *keylock.Set[table.Key]
	stager  atomic.Pointer[Stager]

	// life guards use after Close: operations hold it for reading, Close for writing.
	life   sync.RWMutex
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

var _ table.Table = (*DB)(nil)

// Open opens (creating if needed) the database that opts describe and starts its TTL sweeper.
func Open(opts Options) (*DB, error) {
	const op rookery.Op = "pebble.Open"
	if opts.Clock == nil || len(opts.CursorKey) == 0 {
		return nil, rookery.E(op, rookery.Invalid, "a clock and a cursor key are required")
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 128 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pdb, err := pebblekit.Open(op, pebblekit.Config{Name: "the embedded store", Dir: opts.Dir, InMemory: opts.InMemory, FS: opts.FS,
		CacheBytes: opts.CacheBytes, Logger: opts.Logger, Tune: tune, WALSyncInterval: opts.WALSyncInterval})
	if err != nil {
		return nil, err
	}
	d := &DB{
		db:      pdb,
		schema:  opts.Schema,
		clock:   opts.Clock,
		cursors: table.NewCursors(opts.CursorKey),
		locks:   newKeyLocks(),
		log:     opts.Logger,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	interval := opts.SweepInterval
	if interval == 0 {
		interval = time.Minute
	}
	go d.sweepLoop(interval)
	return d, nil
}

// tune sets the engine options the table is opened with.
func tune(po *cpebble.Options) {
	// 32 MiB memtables: a post's keys that are soon overwritten or deleted (consumers' records,
	// counters, the event log's positions) more often meet in memory and never reach a table, and
	// each flush gives compactions twice the data to merge at once. Larger ones cost more than they
	// save: every insert and point read goes through a deeper skiplist (docs/performance.md).
	po.MemTableSize = 32 << 20
	po.MemTableStopWritesThreshold = 4
	po.LBaseMaxBytes = 256 << 20
	// Level 0 is compacted when it is 8 files deep, not 4 (Pebble's default), and writes stop at 24,
	// not 12: each compaction into the base level rewrites the overlapping part of that level, and
	// with twice the new data per compaction that is paid half as often. Deeper still wrote faster
	// but made queries read more level-0 files (the runs are in docs/performance.md).
	po.L0CompactionThreshold = 8
	po.L0StopWritesThreshold = 24
	// A second compaction may run when compaction debt builds up (Pebble's default is one at a
	// time): fan-out writes faster (docs/performance.md).
	po.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	po.FormatMajorVersion = cpebble.FormatNewest
	// No compactions for tombstone density alone: timelines' trims and indexes' moved entries leave
	// tombstones in every table of the base level, and Pebble's default compacted those tables
	// into the last level as soon as a tenth of their blocks were dense with them, rewriting the
	// last level's overlapping tables for a few MB each: most compactions, and a quarter of the
	// bytes written, at 1,000 posts a second. The tombstones go down with the base level's data
	// in the compactions its size calls for, and reads seldom meet them: a timeline is read from
	// its newest entries, and its trims' tombstones are older than its oldest.
	po.Experimental.TombstoneDenseCompactionThreshold = -1
	// Tables are compressed in the last level, which holds most of the data (each level is ten
	// times the one above) and is rewritten least, and in level 0, where flushes write the blob
	// files of the event log's values (pebblekit: written once, seldom rewritten) and what
	// compactions then read once. The levels between are written again by every compaction out of
	// them, and compressing them each time cost more CPU than their size on disk is worth
	// (docs/performance.md).
	cs := cpebble.DBCompressionFastest
	for i := 1; i < len(cs.Levels)-1; i++ {
		cs.Levels[i] = block.NoCompression
	}
	po.ApplyCompressionSettings(func() cpebble.DBCompressionSettings { return cs })
}

// EngineStats are the engine's figures an operator watches: the bytes it wrote, by where (what a
// write costs on disk, compactions' rewrites included), and what it holds on disk.
type EngineStats struct {
	WALBytes       uint64 // written to the write-ahead log
	FlushedBytes   uint64 // written to tables by memtable flushes
	CompactedBytes uint64 // written to tables by compactions
	DiskBytes      uint64 // on disk now (tables, logs, blobs)
	L0Tables       int64  // tables in level 0 (writes stall when too many)
	// The write-ahead log's syncs, as a histogram: WALSyncCounts[i] syncs took at most
	// WALSyncBounds[i] seconds (cumulative, bounds ascending, the last +Inf), WALSyncSeconds in all. A synced
	// commit waits for one, so slow ones are the tail of a write's latency.
	WALSyncBounds  []float64
	WALSyncCounts  []uint64
	WALSyncSeconds float64
}

// EngineStats returns the engine's figures now (of every user of the engine, Engine's too).
func (d *DB) EngineStats() EngineStats {
	m := d.db.Metrics()
	s := EngineStats{WALBytes: m.WAL.BytesWritten, DiskBytes: m.DiskSpaceUsage(), L0Tables: m.Levels[0].TablesCount}
	for _, l := range m.Levels {
		s.FlushedBytes += l.TableBytesFlushed + l.BlobBytesFlushed
		s.CompactedBytes += l.TableBytesCompacted + l.BlobBytesCompacted
	}
	var syncs dto.Metric
	if h := m.LogWriter.FsyncLatency; h != nil && h.Write(&syncs) == nil {
		// The engine times syncs in nanoseconds.
		for _, b := range syncs.GetHistogram().GetBucket() {
			s.WALSyncBounds = append(s.WALSyncBounds, b.GetUpperBound()/1e9)
			s.WALSyncCounts = append(s.WALSyncCounts, b.GetCumulativeCount())
		}
		s.WALSyncBounds = append(s.WALSyncBounds, math.Inf(1))
		s.WALSyncCounts = append(s.WALSyncCounts, syncs.GetHistogram().GetSampleCount())
		s.WALSyncSeconds = syncs.GetHistogram().GetSampleSum() / 1e9
	}
	return s
}

// Engine returns the Pebble engine under the store, for a component that keeps its own keys there
// (the embedded event log: its keys never start with the store's space bytes). Writes to it share
// the store's write-ahead log and its syncs. It stays open until Close: close its users first.
func (d *DB) Engine() *cpebble.DB { return d.db }

// A Stager keeps keys of its own in the store's engine and takes over some writes of the store's
// transactions, storing them in the transaction's own batch: the embedded event log on the store's
// engine takes the outbox's events (events/embedded), so that an event is in the log the moment
// its change commits, with no relay between them.
type Stager interface {
	// Takes reports whether the stager stores w, a put without conditions; the store then keeps no
	// key of it.
	Takes(w table.Write) bool
	// Stage adds the writes it takes to b. The store calls it under the transaction's key locks,
	// once every condition holds, just before b commits, and then calls committed exactly once
	// with the commit's outcome (nil: committed and synced). An error fails the transaction.
	Stage(b *cpebble.Batch, ws []table.Write) (committed func(error), err error)
}

// SetStager makes s take over the writes it Takes in every transaction from now on (nil: none).
func (d *DB) SetStager(s Stager) {
	if s == nil {
		d.stager.Store(nil)
		return
	}
	d.stager.Store(&s)
}

// Close stops the sweeper and closes the database. Acknowledged writes are already durable.
func (d *DB) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	close(d.stop)
	<-d.done
	if err := d.db.Close(); err != nil {
		return rookery.E(rookery.Op("pebble.Close"), rookery.Internal, err)
	}
	return nil
}

// enter starts an operation: it fails if ctx has ended or the DB is closed; otherwise the caller
// must call d.life.RUnlock when done.
func (d *DB) enter(op rookery.Op, ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return rookery.E(op, rookery.Unavailable, err)
	}
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return rookery.E(op, rookery.Unavailable, "the store is closed")
	}
	return nil
}

// Checkpoint writes a consistent copy of the whole engine (the store, and whatever shares the
// engine: the embedded event log and timelines) to dir, which must not exist, while writes go on.
// Every write made before it began is in the copy, synced or not (the write-ahead log is flushed
// and synced first). Files are hard-linked where dir is on the same file system, else copied.
func (d *DB) Checkpoint(ctx context.Context, dir string) error {
	const op rookery.Op = "pebble.Checkpoint"
	if err := d.enter(op, ctx); err != nil {
		return err
	}
	defer d.life.RUnlock()
	if err := d.db.Checkpoint(dir, cpebble.WithFlushedWAL()); err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	return nil
}

// Ping reports whether the store is open.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.enter("pebble.Ping", ctx); err != nil {
		return err
	}
	d.life.RUnlock()
	return nil
}

func (d *DB) now() int64 { return d.clock.Now().Unix() }

// read returns the stored item with key k, expired or not, or nil if there is none.
func (d *DB) read(op rookery.Op, k table.Key) (table.Item, error) {
	v, closer, err := d.db.Get(baseKey(k))
	if err == cpebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	defer closer.Close()
	it, err := table.DecodeItem(v)
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	return it, nil
}

// visible returns it, or nil if it has expired.
func (d *DB) visible(it table.Item) table.Item {
	if it == nil || table.Expired(it, d.now()) {
		return nil
	}
	return it
}

// Get implements table.Table.
func (d *DB) Get(ctx context.Context, k table.Key) (table.Item, error) {
	const op rookery.Op = "pebble.Get"
	if err := table.CheckKey(op, k); err != nil {
		return nil, err
	}
	if err := d.enter(op, ctx); err != nil {
		return nil, err
	}
	defer d.life.RUnlock()
	it, err := d.read(op, k)
	if err != nil {
		return nil, err
	}
	if it = d.visible(it); it == nil {
		return nil, rookery.E(op, rookery.NotFound, "item not found")
	}
	return it, nil
}

// BatchGet implements table.Table.
func (d *DB) BatchGet(ctx context.Context, keys []table.Key) ([]table.Item, error) {
	const op rookery.Op = "pebble.BatchGet"
	if len(keys) > table.MaxBatchGet {
		return nil, rookery.Errorf(op, rookery.Invalid, "%d keys; the limit is %d", len(keys), table.MaxBatchGet)
	}
	for _, k := range keys {
		if err := table.CheckKey(op, k); err != nil {
			return nil, err
		}
	}
	if err := d.enter(op, ctx); err != nil {
		return nil, err
	}
	defer d.life.RUnlock()
	out := make([]table.Item, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	// One iterator serves every key, visited in key order: it keeps its position and the blocks it
	// has loaded between lookups, where a Get per key would build and tear down an iterator each.
	// Each key is its own prefix (the default comparer), so SeekPrefixGE consults bloom filters.
	order := make([]int, len(keys))
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		order[i], enc[i] = i, baseKey(k)
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(enc[a], enc[b]) })
	iter, err := d.db.NewIter(nil)
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	defer iter.Close()
	for _, i := range order {
		if !iter.SeekPrefixGE(enc[i]) {
			if err := iter.Error(); err != nil {
				return nil, rookery.E(op, rookery.Internal, err)
			}
			continue // not stored
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		it, err := table.DecodeItem(v)
		if err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		out[i] = d.visible(it)
	}
	return out, nil
}

// Put implements table.Table.
func (d *DB) Put(ctx context.Context, item table.Item, conds ...table.Cond) error {
	return d.TransactWrite(ctx, []table.Write{table.PutWrite(item, conds...)})
}

// Delete implements table.Table.
func (d *DB) Delete(ctx context.Context, k table.Key, conds ...table.Cond) error {
	return d.TransactWrite(ctx, []table.Write{table.DeleteWrite(k, conds...)})
}

// Update implements table.Table.
func (d *DB) Update(ctx context.Context, k table.Key, u table.Update, conds ...table.Cond) (table.Item, error) {
	return d.update(ctx, k, u, conds, syncFor(ctx))
}

func (d *DB) update(ctx context.Context, k table.Key, u table.Update, conds []table.Cond, sync *cpebble.WriteOptions) (table.Item, error) {
	var after table.Item
	err := d.transact(ctx, "pebble.Update", []table.Write{table.UpdateWrite(k, u, conds...)}, func(_ int, it table.Item) { after = it }, sync)
	if err != nil {
		return nil, err
	}
	return after, nil
}

// TransactWrite implements table.Table.
func (d *DB) TransactWrite(ctx context.Context, writes []table.Write) error {
	return d.transact(ctx, "pebble.TransactWrite", writes, nil, syncFor(ctx))
}

// BatchWrite implements table.Table: a transaction per MaxTransact writes (each chunk is atomic,
// more than the interface promises).
func (d *DB) BatchWrite(ctx context.Context, writes []table.Write) error {
	return d.batchWrite(ctx, writes, syncFor(ctx))
}

func (d *DB) batchWrite(ctx context.Context, writes []table.Write, sync *cpebble.WriteOptions) error {
	const op rookery.Op = "pebble.BatchWrite"
	writes, err := table.CheckBatchWrites(op, d.schema, writes)
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(writes, table.MaxTransact) {
		if err := d.transact(ctx, op, chunk, nil, sync); err != nil {
			return err
		}
	}
	return nil
}

// syncFor returns how the writes under ctx are committed: synced unless table.WithoutSync
// waived it.
func syncFor(ctx context.Context) *cpebble.WriteOptions {
	if table.SyncWaived(ctx) {
		return cpebble.NoSync
	}
	return cpebble.Sync
}

// Unsynced returns the table with writes that are not synced: a crash may lose the latest of
// them (a prefix of the write-ahead log survives). Use it only for writes that whatever relies on
// them is written after, to the same engine and synced: as the stream logs that consumers of the
// embedded event log in this engine write, whose offsets are written after their handlers' writes
// (a write lost takes its event's offset with it, and the event is handled again).
func (d *DB) Unsynced() table.Table { return unsynced{d} }

type unsynced struct{ *DB }

func (u unsynced) Put(ctx context.Context, item table.Item, conds ...table.Cond) error {
	return u.TransactWrite(ctx, []table.Write{table.PutWrite(item, conds...)})
}

func (u unsynced) Delete(ctx context.Context, k table.Key, conds ...table.Cond) error {
	return u.TransactWrite(ctx, []table.Write{table.DeleteWrite(k, conds...)})
}

func (u unsynced) Update(ctx context.Context, k table.Key, up table.Update, conds ...table.Cond) (table.Item, error) {
	return u.update(ctx, k, up, conds, cpebble.NoSync)
}

func (u unsynced) TransactWrite(ctx context.Context, writes []table.Write) error {
	return u.transact(ctx, "pebble.TransactWrite", writes, nil, cpebble.NoSync)
}

func (u unsynced) BatchWrite(ctx context.Context, writes []table.Write) error {
	return u.batchWrite(ctx, writes, cpebble.NoSync)
}

// transact is every write: it validates, locks every key's stripe, reads each current item, checks
// every condition, and commits one batch, synced unless sync says not (Unsynced). written, if not
// nil, sees each write's new item.
func (d *DB) transact(ctx context.Context, op rookery.Op, writes []table.Write, written func(i int, it table.Item), sync *cpebble.WriteOptions) error {
	writes, err := table.CheckWrites(op, d.schema, writes)
	if err != nil {
		return err
	}
	if err := d.enter(op, ctx); err != nil {
		return err
	}
	defer d.life.RUnlock()

	// The stager's writes are no items of the store's: they take no lock and no condition.
	var stager Stager
	var taken []bool
	var staged []table.Write
	if s := d.stager.Load(); s != nil {
		stager, taken = *s, make([]bool, len(writes))
		for i, w := range writes {
			if w.Kind == table.WritePut && len(w.Conds) == 0 && stager.Takes(w) {
				taken[i] = true
				staged = append(staged, w)
			}
		}
	}
	keys := make([]table.Key, len(writes))
	locked := make([]table.Key, 0, len(writes))
	for i, w := range writes {
		keys[i] = writeKey(w)
		if len(staged) == 0 || !taken[i] {
			locked = append(locked, keys[i])
		}
	}
	unlock := d.locks.Lock(locked...)
	defer unlock()

	b := d.db.NewBatch()
	defer b.Close()
	now := d.now()
	for i, w := range writes {
		if len(staged) > 0 && taken[i] {
			if written != nil {
				written(i, w.Item)
			}
			continue
		}
		if w.Immutable {
			// Its index entries and TTL entry, if it is stored already, are the ones w.Item has:
			// a put writes them again, a delete deletes them.
			old, next := (table.Item)(nil), w.Item
			if w.Kind == table.WriteDelete {
				old, next = w.Item, nil
			}
			if err := d.replace(b, keys[i], old, next); err != nil {
				return rookery.E(op, rookery.Internal, err)
			}
			if written != nil {
				written(i, next)
			}
			continue
		}
		old, err := d.read(op, keys[i])
		if err != nil {
			return err
		}
		cur := old
		if cur != nil && table.Expired(cur, now) {
			cur = nil
		}
		if !table.Holds(w.Conds, cur) {
			cerr := &table.ConditionError{Index: i}
			if len(writes) == 1 {
				return rookery.E(op, rookery.Conflict, "condition failed", cerr)
			}
			return rookery.E(op, rookery.Conflict, "transaction cancelled: a condition failed", cerr)
		}
		var next table.Item
		switch w.Kind {
		case table.WritePut:
			next = w.Item
		case table.WriteUpdate:
			if next, err = table.ApplyUpdate(op, cur, keys[i], w.Update); err != nil {
				return err
			}
			if next, err = table.CheckItem(op, d.schema, next); err != nil {
				return err
			}
		case table.WriteDelete:
		case table.WriteCheck:
			continue
		}
		if err := d.replace(b, keys[i], old, next); err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		if written != nil {
			written(i, next)
		}
	}
	if b.Empty() && len(staged) == 0 {
		return nil
	}
	var committed func(error)
	if len(staged) > 0 {
		// The last step before the commit: whatever Stage reserves, committed settles.
		if committed, err = stager.Stage(b, staged); err != nil {
			return rookery.E(op, err)
		}
		// Staged events are published when the batch commits, and consumers act on them at once
		// (a webhook delivered, say): they must be durable first, or a crash could lose them after
		// they were seen, and the change that caused them be made again with new event ids.
		sync = cpebble.Sync
	}
	err = b.Commit(sync)
	if committed != nil {
		committed(err)
	}
	if err != nil {
		return rookery.E(op, rookery.Internal, "commit failed", err)
	}
	return nil
}

func writeKey(w table.Write) table.Key {
	if w.Kind == table.WritePut {
		return w.Item.Key()
	}
	return w.Key
}

// replace adds to b what turns old (nil: none) into next (nil: delete) for key k, keeping the
// index and TTL invariant of codec.go.
//
// An entry that old and next both have at the same key is not deleted first (the set replaces
// it), and a TTL entry they share is left as it is (it is empty): a write that changes neither
// an index key nor the TTL, say a counter's, adds no tombstones to compact.
func (d *DB) replace(b *cpebble.Batch, k table.Key, old, next table.Item) error {
	if old != nil {
		for _, ix := range d.schema.Indexes {
			ipk, isk, ok := indexKeyOf(ix, old)
			if !ok {
				continue
			}
			if npk, nsk, ok := indexKeyOf(ix, next); ok && npk == ipk && nsk == isk {
				continue
			}
			if err := b.Delete(indexKey(ix.Name, ipk, isk, k), nil); err != nil {
				return err
			}
		}
		if t := ttlOf(old); t.ok && t != ttlOf(next) {
			if err := b.Delete(ttlKey(t.at, k), nil); err != nil {
				return err
			}
		}
	}
	if next == nil {
		return b.Delete(baseKey(k), nil)
	}
	val := table.AppendItem(nil, next)
	if err := b.Set(baseKey(k), val, nil); err != nil {
		return err
	}
	for _, ix := range d.schema.Indexes {
		if ipk, isk, ok := indexKeyOf(ix, next); ok {
			v := val
			if ix.KeysOnlyPartition(ipk) {
				v = keysOnlyEntry(next)
			} else if attrs, ok := ix.ProjectionOf(ipk); ok {
				v = projectedEntry(ix, next, attrs)
			}
			if err := b.Set(indexKey(ix.Name, ipk, isk, k), v, nil); err != nil {
				return err
			}
		}
	}
	if t := ttlOf(next); t.ok && t != ttlOf(old) {
		return b.Set(ttlKey(t.at, k), nil, nil)
	}
	return nil
}

// itemTTL is an item's TTL attribute, if it has one.
type itemTTL struct {
	at int64
	ok bool
}

func ttlOf(it table.Item) itemTTL {
	at, ok := it[table.TTL].(int64)
	return itemTTL{at, ok}
}

// keysOnlyEntry is the value of an index entry of it in a keys-only partition: its TTL alone (if
// it has one), so that a keys-only query tells an expired item as it does from a full copy. The
// keys are in the engine key; a query that wants the item reads it from the base (Query).
func keysOnlyEntry(it table.Item) []byte {
	ttl, ok := it[table.TTL]
	if !ok {
		return noTTLEntry
	}
	return table.AppendItem(nil, table.Item{table.TTL: ttl})
}

// noTTLEntry is keysOnlyEntry of an item without a TTL: an empty item (a batch copies what it sets).
var noTTLEntry = table.AppendItem(nil, table.Item{})

// projectedEntry is the index entry of item it in a projected partition of ix (table.Projection):
// its keys, the index's, its TTL and attrs, those it has.
func projectedEntry(ix table.Index, it table.Item, attrs []string) []byte {
	kept := make(table.Item, len(attrs)+5)
	for _, a := range append([]string{table.PK, table.SK, ix.PK, ix.SK, table.TTL}, attrs...) {
		if v, ok := it[a]; ok {
			kept[a] = v
		}
	}
	return table.AppendItem(nil, kept)
}

func indexKeyOf(ix table.Index, it table.Item) (ipk, isk string, ok bool) {
	ipk, ok1 := it[ix.PK].(string)
	isk, ok2 := it[ix.SK].(string)
	return ipk, isk, ok1 && ok2
}

// Query implements table.Table.
func (d *DB) Query(ctx context.Context, q table.Query) (table.Page, error) {
	const op rookery.Op = "pebble.Query"
	ix, limit, err := table.CheckQuery(op, d.schema, q)
	if err != nil {
		return table.Page{}, err
	}
	var prefix []byte
	if q.Index == "" {
		prefix = appendPart([]byte{spaceBase}, q.PK)
	} else {
		prefix = indexPrefix(q.Index, q.PK)
	}
	lower, upper := skBounds(prefix, q.SK)
	if q.Cursor != "" {
		pos, err := d.cursors.Open(op, q)
		if err != nil {
			return table.Page{}, err
		}
		var at []byte
		if q.Index == "" {
			at = baseKey(pos.Key)
		} else {
			at = indexKey(q.Index, q.PK, pos.IndexSK, pos.Key)
		}
		if q.Desc {
			if bytes.Compare(at, upper) < 0 {
				upper = at
			}
		} else if after := append(at, 0x00); bytes.Compare(after, lower) > 0 {
			lower = after
		}
	}
	if err := d.enter(op, ctx); err != nil {
		return table.Page{}, err
	}
	defer d.life.RUnlock()
	var page table.Page
	if bytes.Compare(lower, upper) >= 0 {
		return page, nil
	}
	// Entries of a keys-only partition hold no item (keysOnlyEntry), and those of a projected one
	// a few attributes (projectedEntry). A query that wants items, or attributes the entries lack,
	// reads them from the base through a snapshot, so that the page is of one moment as a page of
	// full copies is: every entry of a projected partition (fromBase), and those of a keys-only one
	// that hold no item (entries written before it was keys-only are full copies still).
	var r cpebble.Reader = d.db
	fromBase := !q.KeysOnly && !ix.Covers(q.PK, q.Attributes)
	refs := fromBase || ix.KeysOnlyPartition(q.PK) && !q.KeysOnly
	if refs {
		snap := d.db.NewSnapshot()
		defer snap.Close()
		r = snap
	}
	iter, err := r.NewIter(&cpebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return table.Page{}, rookery.E(op, rookery.Internal, err)
	}
	defer iter.Close()
	// One seek, at the end the page starts from: a seek positions every level's iterator.
	var step func() bool
	var valid bool
	if q.Desc {
		step, valid = iter.Prev, iter.Last()
	} else {
		step, valid = iter.Next, iter.First()
	}
	// KeysOnly decodes only each item's TTL, to tell expired ones, and reads the keys from the
	// engine keys (past the prefix): for an index, ISK PK SK; for the base table, SK. A projection
	// decodes its attributes, the keys and the TTL, and drops the TTL unless it is asked for.
	var keep []string
	lastISK, dropTTL := "", false
	switch {
	case q.KeysOnly:
		keep = ttlOnly
	case len(q.Attributes) > 0:
		keep = append(slices.Clip(q.Attributes), table.PK, table.SK, table.TTL)
		if q.Index != "" {
			keep = append(keep, ix.PK, ix.SK)
		}
		dropTTL = !slices.Contains(q.Attributes, table.TTL)
	}
	now := d.now()
	for n := 0; valid; valid = step() {
		v, err := iter.ValueAndErr()
		if err != nil {
			return table.Page{}, rookery.E(op, rookery.Internal, err)
		}
		var it table.Item
		if fromBase {
			it, err = itemOf(r, iter.Key()[len(prefix):], keep)
		} else if it, err = table.DecodeItem(v, keep...); err == nil && refs && it[table.PK] == nil {
			it, err = itemOf(r, iter.Key()[len(prefix):], keep)
		}
		if err != nil {
			return table.Page{}, rookery.E(op, rookery.Internal, err)
		}
		if table.Expired(it, now) {
			continue
		}
		if dropTTL {
			delete(it, table.TTL)
		}
		if n == limit {
			var last table.Position
			if q.KeysOnly {
				last = table.Position{Key: page.Keys[limit-1], IndexSK: lastISK}
			} else {
				it := page.Items[limit-1]
				last = table.Position{Key: it.Key(), IndexSK: it.String(ix.SK)}
			}
			page.Next = d.cursors.Seal(q, last)
			break
		}
		n++
		if !q.KeysOnly {
			page.Items = append(page.Items, it)
			continue
		}
		var k table.Key
		if q.Index == "" {
			var sk [1]string
			_, err = readParts(iter.Key()[len(prefix):], sk[:])
			k = table.Key{PK: q.PK, SK: sk[0]}
		} else {
			lastISK, k, err = entryKey(iter.Key()[len(prefix):])
		}
		if err != nil {
			return table.Page{}, rookery.E(op, rookery.Internal, err)
		}
		page.Keys = append(page.Keys, k)
	}
	if err := iter.Error(); err != nil {
		return table.Page{}, rookery.E(op, rookery.Internal, err)
	}
	return page, nil
}

// entryKey decodes what follows the partition's prefix in an index entry's engine key: the
// index sort key and the item's key.
func entryKey(rest []byte) (isk string, k table.Key, err error) {
	var parts [3]string
	_, err = readParts(rest, parts[:])
	return parts[0], table.Key{PK: parts[1], SK: parts[2]}, err
}

// itemOf reads from r the base item of the index entry whose engine key past the partition's
// prefix is rest, decoding the attributes keep (all if none).
func itemOf(r cpebble.Reader, rest []byte, keep []string) (table.Item, error) {
	_, k, err := entryKey(rest)
	if err != nil {
		return nil, err
	}
	v, closer, err := r.Get(baseKey(k))
	if err != nil { // not even ErrNotFound: the entry and its item are written in one batch
		return nil, err
	}
	defer closer.Close()
	return table.DecodeItem(v, keep...)
}

// ttlOnly is what a keys-only query decodes of an item: its TTL, to tell an expired one.
var ttlOnly = []string{table.TTL}

// skBounds returns the engine key range [lower, upper) of the entries under prefix whose sort key
// satisfies c.
func skBounds(prefix []byte, c table.SKCond) (lower, upper []byte) {
	with := func(s string) []byte { return appendPart(slices.Clip(prefix), s) }
	switch c.Op {
	case table.SKEq:
		p := with(c.Value)
		return p, prefixSuccessor(p)
	case table.SKBeginsWith:
		p := appendEscaped(slices.Clip(prefix), c.Value)
		return p, prefixSuccessor(p)
	case table.SKBetween:
		return with(c.Value), prefixSuccessor(with(c.Value2))
	case table.SKLt:
		return prefix, with(c.Value)
	case table.SKLe:
		return prefix, prefixSuccessor(with(c.Value))
	case table.SKGt:
		return prefixSuccessor(with(c.Value)), prefixSuccessor(prefix)
	case table.SKGe:
		return with(c.Value), prefixSuccessor(prefix)
	}
	return prefix, prefixSuccessor(prefix)
}

// prefixSuccessor returns the smallest key greater than every key that starts with p.
func prefixSuccessor(p []byte) []byte {
	s := slices.Clone(p)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 0xFF {
			s[i]++
			return s[:i+1]
		}
	}
	return nil // p is all 0xFF: no successor; never happens (keys start with a space byte)
}

// Flush writes the memtable to sstables. Benchmarks use it to read from the state a long-running
// store is in (most data in sstables and the block cache), not only from the write buffer.
func (d *DB) Flush() error {
	if err := d.enter("pebble.Flush", context.Background()); err != nil {
		return err
	}
	defer d.life.RUnlock()
	return d.db.Flush()
}
