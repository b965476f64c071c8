package pebblestore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testtable"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/table/tabletest"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
	"github.com/rookery/rookery/timeline/timelinetest"
)

var ctx = context.Background()

// openStore opens a table store in memory, as rookery serve does on disk: the timelines live in
// its engine.
func openStore(t testing.TB, clock rookery.Clock) *pebble.DB {
	return testtable.Pebble(t, app.Schema, clock)
}

func open(t testing.TB, db *pebble.DB, o pebblestore.Options) *pebblestore.Store {
	s := pebblestore.New(db.Engine(), o)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		return open(t, openStore(t, cfg.Clock), pebblestore.Options{Limits: cfg.Limits, Clock: cfg.Clock})
	})
}

// TestConformanceMarkerCaches runs the suite with no marker cache and with one so small that it
// empties itself all the time.
func TestConformanceMarkerCaches(t *testing.T) {
	for _, size := range []int{-1, 4} {
		t.Run(fmt.Sprintf("cache=%d", size), func(t *testing.T) {
			timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
				return open(t, openStore(t, cfg.Clock), pebblestore.Options{Limits: cfg.Limits, Clock: cfg.Clock, MarkerCache: size})
			})
		})
	}
}

// TestConformanceHeadCaches runs the suite with no head cache and with one of a head a shard, which
// evicts all the time.
func TestConformanceHeadCaches(t *testing.T) {
	for _, size := range []int{-1, 1} {
		t.Run(fmt.Sprintf("cache=%d", size), func(t *testing.T) {
			timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
				return open(t, openStore(t, cfg.Clock), pebblestore.Options{Limits: cfg.Limits, Clock: cfg.Clock, HeadCache: size})
			})
		})
	}
}

// TestPushesRacingCreates: pushes that read markers while timelines are being created (through a
// marker cache that keeps emptying itself) never leave the cache believing a created timeline
// missing: once the creates are done, one more push reaches every timeline.
func TestPushesRacingCreates(t *testing.T) {
	for round := range 10 {
		size := []int{pebblestore.DefaultMarkerCache, 8}[round%2]
		s := open(t, openStore(t, rookery.SystemClock), pebblestore.Options{SweepEvery: -1, MarkerCache: size})
		var users []string
		for i := range 400 {
			users = append(users, fmt.Sprintf("u%03d", i))
		}
		at := time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					e := timeline.Entry{PostID: fmt.Sprintf("R%d-%d", w, n), AuthorID: "a", At: at}
					if err := s.Push(ctx, users, e); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		for _, u := range users {
			if err := s.Create(ctx, u, nil); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		last := timeline.Entry{PostID: "Z", AuthorID: "a", At: at.Add(time.Second)}
		if err := s.Push(ctx, users, last); err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			p, err := s.Page(ctx, u, timeline.Entry{}, 1)
			if err != nil || len(p.Entries) != 1 || p.Entries[0] != last {
				t.Fatalf("cache %d: %s's newest entry = %+v, %v; want %+v", size, u, p.Entries, err, last)
			}
		}
	}
}

// keys counts the engine's keys that start with each of the timeline spaces' bytes.
func keys(t *testing.T, db *cpebble.DB) map[byte]int {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := map[byte]int{}
	for ok := it.First(); ok; ok = it.Next() {
		n[it.Key()[0]]++
	}
	return n
}

// TestSweep: the sweeper deletes what a timeline that stopped existing held (marker and entries),
// the entries past their TTL of the others and the post-index keys of posts past the TTL, and
// leaves the table store's keys alone.
func TestSweep(t *testing.T) {
	c := tabletest.NewClock(time.Now())
	db := openStore(t, c)
	if err := db.Put(ctx, table.Item{table.PK: "USER#x", table.SK: "META"}); err != nil {
		t.Fatal(err)
	}
	before := keys(t, db.Engine())
	s := open(t, db, pebblestore.Options{Limits: timeline.Limits{Cap: 10, TTL: 20 * time.Hour, InactiveAfter: 24 * time.Hour}, Clock: c, SweepEvery: -1})
	entry := func(n int, age time.Duration) timeline.Entry {
		return timeline.Entry{PostID: fmt.Sprintf("P%d", n), AuthorID: "a", At: c.Now().Add(-age)}
	}
	if err := s.Create(ctx, "idle", []timeline.Entry{entry(1, time.Hour), entry(2, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(12 * time.Hour)
	if err := s.Create(ctx, "reader", []timeline.Entry{entry(3, 11*time.Hour), entry(4, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c.Advance(13 * time.Hour) // idle's marker has expired; reader's has not
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	after := keys(t, db.Engine())
	// reader keeps its marker and P4 ('f' and 'g'); P3 went past its TTL; idle is gone.
	want := map[byte]int{'h': 1, 'f': 1, 'g': 1}
	for b, n := range before {
		want[b] = n
	}
	for b := range 256 {
		if after[byte(b)] != want[byte(b)] {
			t.Errorf("%d keys in space %q after the sweep; want %d", after[byte(b)], byte(b), want[byte(b)])
		}
	}
	if ok, _ := s.Exists(ctx, "idle"); ok {
		t.Error("the idle timeline exists after the sweep")
	}
	p, err := s.Page(ctx, "reader", timeline.Entry{}, 10)
	if err != nil || len(p.Entries) != 1 || p.Entries[0].PostID != "P4" {
		t.Fatalf("reader's page after the sweep = %+v, %v", p, err)
	}
	if _, err := db.Get(ctx, table.Key{PK: "USER#x", SK: "META"}); err != nil {
		t.Fatalf("the store's item after the sweep: %v", err)
	}
}

// TestReopen: what a push wrote is there after the engine is closed and opened again, and
// RemovePost then finds every copy through the post index.
func TestReopen(t *testing.T) {
	// The default marker cache loads every marker when the Store opens; one of 100 holds a third
	// of them, and pushes read the others from the engine.
	for _, markers := range []int{0, 100} {
		t.Run(fmt.Sprintf("markers=%d", markers), func(t *testing.T) { testReopen(t, markers) })
	}
}

func testReopen(t *testing.T, markers int) {
	dir := t.TempDir()
	o := pebble.Options{Dir: dir, Schema: app.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k")}
	db, err := pebble.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	s := pebblestore.New(db.Engine(), pebblestore.Options{SweepEvery: -1})
	var users []string
	for i := range 300 {
		users = append(users, fmt.Sprintf("u%d", i))
		if err := s.Create(ctx, users[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	e := timeline.Entry{PostID: "P1", AuthorID: "a", At: time.Now().Truncate(time.Millisecond).UTC()}
	if err := s.Push(ctx, users, e); err != nil {
		t.Fatal(err)
	}
	// Into a file, behind bloom filters: the first read of a timeline seeks its marker with them.
	if err := db.Engine().Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db.Close()
	if db, err = pebble.Open(o); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s = pebblestore.New(db.Engine(), pebblestore.Options{SweepEvery: -1, MarkerCache: markers})
	defer s.Close()
	// A push after reopening reaches every timeline there is, and makes none.
	e2 := timeline.Entry{PostID: "P2", AuthorID: "a", At: e.At.Add(time.Millisecond)}
	if err := s.Push(ctx, append([]string{"nobody"}, users...), e2); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, "nobody"); ok || err != nil {
		t.Fatalf("a push made a timeline: %v, %v", ok, err)
	}
	if p, err := s.Page(ctx, "nobody", timeline.Entry{}, 10); err != nil || p.Exists || len(p.Entries) != 0 {
		t.Fatalf("the page of no timeline = %+v, %v", p, err)
	}
	for _, u := range users {
		p, err := s.Page(ctx, u, timeline.Entry{}, 10)
		if err != nil || len(p.Entries) != 2 || p.Entries[0] != e2 || p.Entries[1] != e {
			t.Fatalf("%s's timeline after reopening = %+v, %v; want %+v, %+v", u, p, err, e2, e)
		}
	}
	if err := s.RemovePost(ctx, "P2"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePost(ctx, "P1"); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if p, _ := s.Page(ctx, u, timeline.Entry{}, 10); len(p.Entries) != 0 {
			t.Fatalf("%s's timeline after RemovePost = %+v", u, p)
		}
	}
}

// TestPostIndexOutlivesEntries: a push writes one post-index key for all its timelines, and an entry
// that leaves a timeline stays named there; RemovePost still removes every copy and every key.
func TestPostIndexOutlivesEntries(t *testing.T) {
	db := openStore(t, rookery.SystemClock)
	s := open(t, db, pebblestore.Options{SweepEvery: -1})
	var users []string
	for i := range 5 {
		users = append(users, fmt.Sprintf("u%d", i))
		if err := s.Create(ctx, users[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	e := timeline.Entry{PostID: "P1", AuthorID: "a", At: time.Now()}
	if err := s.Push(ctx, users, e); err != nil {
		t.Fatal(err)
	}
	if n := keys(t, db.Engine()); n['f'] != 5 || n['g'] != 1 {
		t.Fatalf("after a push to 5 timelines: %d entry keys, %d post-index keys; want 5 and 1", n['f'], n['g'])
	}
	if err := s.RemoveAuthor(ctx, "u2", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(ctx, users[3:], timeline.Entry{PostID: "P1", AuthorID: "a", At: e.At}); err != nil { // a redelivered page
		t.Fatal(err)
	}
	// u0, first of the push, takes the post again alone (as an unfollow and a follow would):
	// its own index key must not replace the push's.
	if err := s.RemoveAuthor(ctx, "u0", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Merge(ctx, "u0", []timeline.Entry{{PostID: "P1", AuthorID: "a", At: e.At}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePost(ctx, "P1"); err != nil {
		t.Fatal(err)
	}
	if n := keys(t, db.Engine()); n['f'] != 0 || n['g'] != 0 {
		t.Fatalf("after RemovePost: %d entry keys, %d post-index keys; want none", n['f'], n['g'])
	}
	// A data directory from before: one index key per entry, 'g' post 0x00 user -> be64(ms).
	at := binary.BigEndian.AppendUint64(nil, uint64(e.At.UnixMilli())^1<<63)
	if err := s.Merge(ctx, "u1", []timeline.Entry{{PostID: "P2", AuthorID: "a", At: e.At}}); err != nil {
		t.Fatal(err)
	}
	it, err := db.Engine().NewIter(&cpebble.IterOptions{LowerBound: []byte("gP2\x00"), UpperBound: []byte("gP2\x01")})
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := db.Engine().Delete(it.Key(), nil); err != nil {
			t.Fatal(err)
		}
	}
	it.Close()
	if err := db.Engine().Set([]byte("gP2\x00u1"), at, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePost(ctx, "P2"); err != nil {
		t.Fatal(err)
	}
	if n := keys(t, db.Engine()); n['f'] != 0 || n['g'] != 0 {
		t.Fatalf("after RemovePost of an entry indexed the old way: %d entry keys, %d post-index keys; want none", n['f'], n['g'])
	}
}
