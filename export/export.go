// Package export is the analytics export (seed 001's Streams -> S3 -> warehouse path): a consumer
// of the event pipeline that writes every event, once, to Parquet files partitioned by the date it
// occurred (UTC), which DuckDB, Spark or Athena read as a Hive-partitioned table:
//
//	<dir>/dt=2026-11-22/part-0000000042.parquet
//
// The schema is Row's (docs/engagement.md has it as a table). Files are rolled by row count, size
// and age, and appear atomically: each is written to a hidden temporary name (".part-*", which
// readers skip), synced, and renamed; the directory is synced after.
//
// Exactly once, also across crashes. The event log delivers at least once, and within a partition
// it delivers the next event only after the previous one is acknowledged. Handle acknowledges an
// event once its row is synced to a journal (<dir>/_journal/<gen>.jsonl; concurrent handlers share
// syncs), so the consumer does not wait for a file to roll. Every journal generation becomes one
// file per date, named after the generation. On start, an unrolled journal is rolled again,
// skipping the dates whose file for that generation exists (the rename made it whole), so a crash
// mid-roll neither loses nor repeats a row. Events delivered again (a crash between a journal sync
// and the ack, or before the log recorded the ack) are recognized by id: the ids of the current
// journal and of the journals rolled within DedupeWindow are kept.
package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/rookery/rookery"
)

// Row is one event in the export files. Times are UTC milliseconds (Parquet TIMESTAMP(MILLIS)).
type Row struct {
	EventID    string `parquet:"event_id,zstd"`
	Type       string `parquet:"type,dict,zstd"`
	Version    int32  `parquet:"version"`
	Key        string `parquet:"key,zstd"`
	OccurredAt int64  `parquet:"occurred_at,timestamp(millisecond)"`
	Payload    string `parquet:"payload,json,zstd"`
	ExportedAt int64  `parquet:"exported_at,timestamp(millisecond)"`
}

// A Store keeps the export files: a directory (the default, on Options.Dir) or an S3 bucket
// (export/s3). Names are slash-separated paths such as dt=2026-11-22/part-0000000042.parquet.
type Store interface {
	// Has reports whether a file named name is stored. Files are stored whole or not at all.
	Has(ctx context.Context, name string) (bool, error)
	// Put stores the complete local file at path as name, whole or not at all, and removes path.
	// Putting a name that is stored already leaves it as it is: an export file's name says which
	// rows it holds (their date and journal generation), so a second put would hold the same rows.
	Put(ctx context.Context, name, path string) error
}

// Options configure an Exporter; zero values mean the defaults.
type Options struct {
	// Dir holds the journal (_journal/), and the files too unless Store is set (required).
	Dir string
	// Store, if set, keeps the files instead of Dir (an S3 bucket); Dir then holds the journal only.
	Store Store
	// A file is rolled when its generation holds MaxRows rows or MaxBytes bytes of payload, or
	// MaxAge after its first row (defaults 100,000 rows, 64 MiB, 1 minute).
	MaxRows  int
	MaxBytes int64
	MaxAge   time.Duration
	// Rolled journals are kept, to recognize events delivered again, for DedupeWindow after their
	// roll (default 2 minutes: far longer than a log takes to record an ack, or to time out an
	// unacknowledged delivery) and at least the newest KeepJournals (default 4).
	DedupeWindow time.Duration
	KeepJournals int
	Clock        rookery.Clock
	Logger       *slog.Logger
}

// Exporter writes events to Parquet files. Handle is its consumer handler.
type Exporter struct {
	o Options

	mu      sync.Mutex
	gen     int64            // the current journal generation
	journal *os.File         // its file
	rows    []Row            // its rows
	bytes   int64            // their payload bytes
	first   time.Time        // when its first row came
	seen    map[string]int64 // event id -> generation, for the current and kept generations
	synced  int64            // bytes of the journal known synced
	written int64            // bytes of the journal written
	syncing *sync.Cond       // signalled when a sync ends
	inSync  bool             // a sync is running
	roll    chan struct{}    // asks the roller to roll now
	// unrolled are the closed generations whose files are not written yet (more than one only when
	// writing failed); guarded by mu.
	unrolled []generation
	rolled   map[int64]time.Time // kept rolled generations, and when they were rolled
	stop     context.CancelFunc
	done     chan struct{}
	errs     chan error
}

const journalDir = "_journal"

// generation is a closed journal generation and its rows.
type generation struct {
	gen  int64
	rows []Row
}

// Open starts an Exporter over o.Dir: it rolls the journals a crash left, and starts the roller.
func Open(o Options) (*Exporter, error) {
	if o.Dir == "" {
		return nil, errors.New("export: Options.Dir is required")
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 100_000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.MaxAge <= 0 {
		o.MaxAge = time.Minute
	}
	if o.DedupeWindow <= 0 {
		o.DedupeWindow = 2 * time.Minute
	}
	if o.KeepJournals <= 0 {
		o.KeepJournals = 4
	}
	if o.Clock == nil {
		o.Clock = rookery.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Store == nil {
		o.Store = dirStore(o.Dir)
	}
	e := &Exporter{o: o, seen: map[string]int64{}, roll: make(chan struct{}, 1), rolled: map[int64]time.Time{}, done: make(chan struct{})}
	e.syncing = sync.NewCond(&e.mu)
	if err := e.recover(); err != nil {
		return nil, err
	}
	if err := e.startJournal(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go e.roller(ctx)
	return e, nil
}

func (e *Exporter) journalPath(gen int64, suffix string) string {
	return filepath.Join(e.o.Dir, journalDir, fmt.Sprintf("%010d%s", gen, suffix))
}

// recover rolls unrolled journals, loads the ids of the kept rolled ones, and removes temporary
// files a crash left.
func (e *Exporter) recover() error {
	dir := filepath.Join(e.o.Dir, journalDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var open, done []int64
	for _, de := range entries {
		name := de.Name()
		gen, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSuffix(name, ".jsonl"), ".done"), 10, 64)
		if err != nil {
			continue
		}
		e.gen = max(e.gen, gen)
		if strings.HasSuffix(name, ".jsonl") {
			open = append(open, gen)
		} else if strings.HasSuffix(name, ".done") {
			done = append(done, gen)
		}
	}
	if err := e.removeTemps(); err != nil {
		return err
	}
	// The ids of the kept rolled journals first: an unrolled journal may repeat one of them.
	for _, gen := range done {
		fi, err := os.Stat(e.journalPath(gen, ".done"))
		if err != nil {
			return err
		}
		e.rolled[gen] = fi.ModTime()
	}
	if err := e.pruneJournals(); err != nil {
		return err
	}
	for gen := range e.rolled {
		rows, err := readJournal(e.journalPath(gen, ".done"))
		if err != nil {
			return err
		}
		for _, r := range rows {
			e.seen[r.EventID] = gen
		}
	}
	slices.Sort(open)
	for _, gen := range open {
		rows, err := readJournal(e.journalPath(gen, ".jsonl"))
		if err != nil {
			return err
		}
		rows = e.dedupe(rows, gen)
		if err := e.writeFiles(gen, rows); err != nil {
			return err
		}
		if err := e.finishJournal(gen); err != nil {
			return err
		}
		e.rolled[gen] = e.o.Clock.Now()
	}
	return e.pruneJournals()
}

// dedupe drops rows whose events are in an earlier generation's files, or twice in rows, and
// records the rest as seen in gen.
func (e *Exporter) dedupe(rows []Row, gen int64) []Row {
	out := rows[:0]
	for _, r := range rows {
		if _, ok := e.seen[r.EventID]; ok {
			continue
		}
		e.seen[r.EventID] = gen
		out = append(out, r)
	}
	return out
}

// readJournal reads a journal's rows; a torn last line (a write the crash cut) is ignored.
func readJournal(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for line := range bytes.Lines(b) {
		var r Row
		if !bytes.HasSuffix(line, []byte("\n")) || json.Unmarshal(line, &r) != nil {
			continue
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (e *Exporter) removeTemps() error {
	return filepath.WalkDir(e.o.Dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), ".part-") {
			return os.Remove(path)
		}
		return nil
	})
}

// startJournal begins the next generation. e.mu is held or the exporter not yet shared.
func (e *Exporter) startJournal() error {
	e.gen++
	f, err := os.OpenFile(e.journalPath(e.gen, ".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := syncDir(filepath.Join(e.o.Dir, journalDir)); err != nil {
		f.Close()
		return err
	}
	e.journal, e.rows, e.bytes, e.written, e.synced, e.first = f, nil, 0, 0, 0, time.Time{}
	return nil
}

// Handle is the consumer handler: it returns nil once ev's row is synced to the journal (or ev was
// exported before).
func (e *Exporter) Handle(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "export.Handle"
	row := Row{EventID: ev.ID, Type: ev.Type, Version: int32(ev.Version), Key: ev.Key,
		OccurredAt: ev.OccurredAt.UnixMilli(), Payload: string(ev.Payload), ExportedAt: e.o.Clock.Now().UnixMilli()}
	if len(ev.Payload) == 0 {
		row.Payload = "null"
	}
	line, err := json.Marshal(row)
	if err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.seen[ev.ID]; ok {
		return nil
	}
	if _, err := e.journal.Write(line); err != nil {
		return rookery.E(op, rookery.Unavailable, "writing the export journal failed", err)
	}
	e.written += int64(len(line))
	e.seen[ev.ID] = e.gen
	e.rows = append(e.rows, row)
	e.bytes += int64(len(row.Payload))
	if len(e.rows) == 1 {
		e.first = e.o.Clock.Now()
	}
	if err := e.syncTo(e.written); err != nil {
		// Not acknowledged, so it comes again; it stays seen, and its row goes to the file from
		// memory at the next roll.
		return rookery.E(op, rookery.Unavailable, "syncing the export journal failed", err)
	}
	if len(e.rows) >= e.o.MaxRows || e.bytes >= e.o.MaxBytes {
		select {
		case e.roll <- struct{}{}:
		default:
		}
	}
	return nil
}

// syncTo returns once the journal is synced through offset n: one handler syncs for everyone
// waiting (group commit). e.mu is held; it is released during the sync.
func (e *Exporter) syncTo(n int64) error {
	f := e.journal
	for e.synced < n && e.journal == f {
		if e.inSync {
			e.syncing.Wait()
			continue
		}
		e.inSync = true
		target := e.written
		e.mu.Unlock()
		err := f.Sync()
		e.mu.Lock()
		e.inSync = false
		e.syncing.Broadcast()
		if err != nil {
			return err
		}
		e.synced = max(e.synced, target)
	}
	return nil
}

// roller rolls the current generation when it is full or old enough.
func (e *Exporter) roller(ctx context.Context) {
	defer close(e.done)
	tick := time.NewTicker(min(e.o.MaxAge/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.roll:
		case <-tick.C:
			e.mu.Lock()
			due := len(e.rows) > 0 && e.o.Clock.Now().Sub(e.first) >= e.o.MaxAge
			e.mu.Unlock()
			if !due {
				continue
			}
		}
		if err := e.Roll(); err != nil {
			e.o.Logger.Error("rolling the export failed; trying again", "err", err)
			time.Sleep(time.Second)
		}
	}
}

// Roll writes the current generation's rows to their files now, and starts a new generation.
// Events handled meanwhile go to the new one.
func (e *Exporter) Roll() error {
	e.mu.Lock()
	if len(e.rows) > 0 {
		for e.inSync {
			e.syncing.Wait()
		}
		gen, rows, f := e.gen, e.rows, e.journal
		err := f.Sync()
		if err == nil {
			err = e.startJournal()
		}
		if err != nil {
			e.mu.Unlock()
			return err
		}
		f.Close()
		e.unrolled = append(e.unrolled, generation{gen, rows})
	}
	pending := e.unrolled
	e.mu.Unlock()
	// Generations whose files could not be written before (a full disk) go first, in order.
	for len(pending) > 0 {
		g := pending[0]
		if err := e.writeFiles(g.gen, g.rows); err != nil {
			return err
		}
		e.mu.Lock()
		err := e.finishJournal(g.gen)
		if err == nil {
			e.unrolled = e.unrolled[1:]
			e.rolled[g.gen] = e.o.Clock.Now()
			err = e.pruneJournals()
		}
		pending = e.unrolled
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes rows of generation gen, one file per date; a date whose file exists is done.
func (e *Exporter) writeFiles(gen int64, rows []Row) error {
	byDate := map[string][]Row{}
	for _, r := range rows {
		dt := time.UnixMilli(r.OccurredAt).UTC().Format(time.DateOnly)
		byDate[dt] = append(byDate[dt], r)
	}
	dates := make([]string, 0, len(byDate))
	for dt := range byDate {
		dates = append(dates, dt)
	}
	sort.Strings(dates)
	ctx := context.Background()
	for _, dt := range dates {
		name := fmt.Sprintf("dt=%s/part-%010d.parquet", dt, gen)
		if has, err := e.o.Store.Has(ctx, name); err != nil || has {
			if err != nil {
				return fmt.Errorf("export: %s: %w", name, err)
			}
			continue
		}
		// Encoded beside the journal (a hidden name, which readers skip and a restart removes),
		// then put whole.
		tmp, err := os.CreateTemp(filepath.Join(e.o.Dir, journalDir), ".part-*.tmp")
		if err != nil {
			return err
		}
		err = encodeParquet(tmp, byDate[dt])
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = e.o.Store.Put(ctx, name, tmp.Name())
		}
		os.Remove(tmp.Name()) // gone already after a put
		if err != nil {
			return fmt.Errorf("export: %s: %w", name, err)
		}
	}
	return nil
}

// dirStore keeps the export files in a directory: a put is a rename (the temporary file is on the
// same file system, under the journal) followed by a sync of the directory.
type dirStore string

func (d dirStore) Has(_ context.Context, name string) (bool, error) {
	_, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(name)))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d dirStore) Put(_ context.Context, name, path string) error {
	final := filepath.Join(string(d), filepath.FromSlash(name))
	if _, err := os.Stat(final); err == nil {
		return os.Remove(path)
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(path, final); err != nil {
		return err
	}
	return syncDir(dir)
}

// encodeParquet writes rows to f as one Parquet file and syncs it.
func encodeParquet(f *os.File, rows []Row) error {
	bw := bufio.NewWriterSize(f, 1<<20)
	w := parquet.NewGenericWriter[Row](bw)
	for chunk := range slices.Chunk(rows, 10_000) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

// finishJournal marks generation gen rolled.
func (e *Exporter) finishJournal(gen int64) error {
	if err := os.Rename(e.journalPath(gen, ".jsonl"), e.journalPath(gen, ".done")); err != nil {
		return err
	}
	return syncDir(filepath.Join(e.o.Dir, journalDir))
}

// pruneJournals deletes the rolled journals that are neither among the newest KeepJournals nor
// younger than DedupeWindow, and forgets their ids.
func (e *Exporter) pruneJournals() error {
	gens := make([]int64, 0, len(e.rolled))
	for g := range e.rolled {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	cut := e.o.Clock.Now().Add(-e.o.DedupeWindow)
	dropped := map[int64]bool{}
	for _, g := range gens[:max(0, len(gens)-e.o.KeepJournals)] {
		if e.rolled[g].After(cut) {
			continue
		}
		delete(e.rolled, g)
		dropped[g] = true
		if err := os.Remove(e.journalPath(g, ".done")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if len(dropped) > 0 {
		for id, g := range e.seen {
			if dropped[g] {
				delete(e.seen, id)
			}
		}
	}
	return nil
}

// Close rolls what is pending and stops the roller.
func (e *Exporter) Close() error {
	e.stop()
	<-e.done
	err := e.Roll()
	e.mu.Lock()
	defer e.mu.Unlock()
	if cerr := e.journal.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadDir reads every export file under dir (for tests and tools), in no particular order.
func ReadDir(dir string) ([]Row, error) {
	var rows []Row
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), "part-") || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		rs, err := parquet.ReadFile[Row](path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, rs...)
		return nil
	})
	return rows, err
}
