package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/local"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
)

func options(dir string) local.Options {
	return local.Options{Dir: dir,
		Store:     pebble.Options{Clock: rookery.SystemClock, CursorKey: []byte("k")},
		Log:       &embedded.Options{Partitions: 4},
		Timelines: &pebblestore.Options{}}
}

// dataDir returns a new data directory; legacy makes it hold an events/ directory, as an earlier
// version made for a log of its own.
func dataDir(t *testing.T, legacy bool) string {
	dir := t.TempDir()
	if legacy {
		if err := os.Mkdir(filepath.Join(dir, "events"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The log goes into the store's engine and is wired there: the outbox is direct, and what an
// earlier run left in the outbox is in the log before anything newer. A data directory whose
// events/ holds a log of its own (made by an earlier version) keeps it, and the relay moves the
// events as with any other log.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, legacy := range []bool{false, true} {
		dir := dataDir(t, legacy)
		// An earlier run's event, left in the outbox of a store opened alone.
		o := options(dir)
		o.Log, o.Timelines = nil, nil
		b, err := local.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if b.Log != nil || b.Timelines != nil || b.Direct() {
			t.Fatalf("a store opened alone came with a log (%v), timelines (%v) or direct (%v)", b.Log != nil, b.Timelines != nil, b.Direct())
		}
		left, _ := (&events.Outbox{Table: b.Store}).Write(eventstest.Event("e1", "k", 0))
		if err := b.Store.TransactWrite(ctx, []table.Write{left}); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}

		b, err = local.Open(ctx, options(dir))
		if err != nil {
			t.Fatal(err)
		}
		ob := &events.Outbox{Table: b.Store, Log: b.Log, Direct: b.Direct()}
		w, _ := ob.Write(eventstest.Event("e2", "k", 1))
		if err := b.Store.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
		pending, _ := ob.Pending(ctx, 10)
		inLog, _, _ := b.Log.Lag(ctx, "g")
		if !legacy && (!b.Direct() || pending != 0 || inLog != 2) {
			t.Fatalf("on the store's engine: direct %v, %d left in the outbox, %d in the log; want direct, 0, 2", b.Direct(), pending, inLog)
		}
		if legacy && (b.Direct() || pending != 2 || inLog != 0) {
			t.Fatalf("a log of its own: direct %v, %d in the outbox, %d in the log; want the relay's: 2, 0", b.Direct(), pending, inLog)
		}
		if b.Log.SharesEngine(b.Store.Engine()) == legacy {
			t.Fatalf("legacy=%v: the log shares the store's engine: %v", legacy, !legacy)
		}
		files, _ := os.ReadDir(filepath.Join(dir, "events"))
		if legacy && len(files) == 0 {
			t.Error("an existing events/ directory was not used")
		}
		if !legacy && files != nil {
			t.Errorf("the log made events/ (%d files) instead of using the store's engine", len(files))
		}
		// The timelines are in the store's engine, and survive a reopen.
		if err := b.Timelines.Create(ctx, "u1", []timeline.Entry{{PostID: "p1", AuthorID: "a", At: time.Now().Truncate(time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b, err = local.Open(ctx, options(dir))
		if err != nil {
			t.Fatal(err)
		}
		page, err := b.Timelines.Page(ctx, "u1", timeline.Entry{}, 10)
		if err != nil || !page.Exists || len(page.Entries) != 1 {
			t.Fatalf("the timeline after a reopen: %+v, %v", page, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpoint: a checkpoint taken while the backends are open opens as a data directory of its
// own, with the store's items, the log's events and the timelines; with a log of its own (events/)
// as with the log in the store's engine. A checkpoint into a directory that exists is refused.
func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, legacy := range []bool{false, true} {
		dir := dataDir(t, legacy)
		b, err := local.Open(ctx, options(dir))
		if err != nil {
			t.Fatal(err)
		}
		ob := &events.Outbox{Table: b.Store, Log: b.Log, Direct: b.Direct()}
		w, _ := ob.Write(eventstest.Event("e1", "k", 0))
		item := table.PutWrite(table.Item{table.PK: "P", table.SK: "S", "v": int64(1)})
		if err := b.Store.TransactWrite(ctx, []table.Write{w, item}); err != nil {
			t.Fatal(err)
		}
		if legacy { // the relay's work, here by hand
			if err := b.Log.Append(ctx, []rookery.Event{eventstest.Event("e1", "k", 0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Timelines.Create(ctx, "u1", []timeline.Entry{{PostID: "p1", AuthorID: "a", At: time.Now().Truncate(time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
		backup := filepath.Join(t.TempDir(), "backup")
		if err := b.Checkpoint(ctx, backup); err != nil {
			t.Fatal(err)
		}
		if err := b.Checkpoint(ctx, backup); err == nil {
			t.Error("a second checkpoint into the same directory succeeded")
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(filepath.Join(backup, "events"))
		if legacy != (err == nil) {
			t.Errorf("legacy=%v: the checkpoint's events/: %v", legacy, err)
		}
		c, err := local.Open(ctx, options(backup))
		if err != nil {
			t.Fatal(err)
		}
		if it, err := c.Store.Get(ctx, table.Key{PK: "P", SK: "S"}); err != nil || it.Int("v") != 1 {
			t.Errorf("legacy=%v: the item in the checkpoint: %v, %v", legacy, it, err)
		}
		if n, _, err := c.Log.Lag(ctx, "g"); err != nil || n != 1 {
			t.Errorf("legacy=%v: events in the checkpoint's log: %d, %v; want 1", legacy, n, err)
		}
		if page, err := c.Timelines.Page(ctx, "u1", timeline.Entry{}, 10); err != nil || len(page.Entries) != 1 {
			t.Errorf("legacy=%v: the timeline in the checkpoint: %+v, %v", legacy, page, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
