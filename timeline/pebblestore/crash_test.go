package pebblestore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/internal/crashtest"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
)

// Push commits its batch without a sync and syncs the write-ahead log once before it returns. The
// crash test checks that this makes every acknowledged push durable: a child process (this test
// binary) pushes posts to 20 timelines from 4 goroutines and prints "ack N" after each Push
// returns; it is killed with SIGKILL at a random moment; after reopening, every acknowledged post
// is in every timeline.

const crashDirEnv = "ROOKERY_TIMELINE_CRASH_DIR"

const crashUsers = 20

var crashT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func crashStore(t testing.TB, dir string) (*pebble.DB, *pebblestore.Store) {
	db, err := pebble.Open(pebble.Options{Dir: dir, Schema: app.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// A cap no test reaches and a TTL no entry passes: every push stays.
	return db, pebblestore.New(db.Engine(), pebblestore.Options{Limits: timeline.Limits{Cap: 1 << 20, TTL: 100 * 365 * 24 * time.Hour}, SweepEvery: -1})
}

func crashEntry(n int) timeline.Entry {
	return timeline.Entry{PostID: fmt.Sprintf("P%09d", n), AuthorID: "a", At: crashT0.Add(time.Duration(n) * time.Millisecond)}
}

// TestCrashPusher is the child: it does nothing unless started by TestCrashPush.
func TestCrashPusher(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	_, s := crashStore(t, dir)
	var users []string
	for u := range crashUsers {
		users = append(users, fmt.Sprintf("u%d", u))
		if ok, err := s.Exists(ctx, users[u]); err != nil || !ok {
			if err := s.Create(ctx, users[u], nil); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
		}
	}
	start := rand.IntN(1 << 30)
	out := make(chan string, 1024)
	for w := range 4 {
		go func() {
			for n := start + w; ; n += 4 {
				if err := s.Push(ctx, users, crashEntry(n)); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				out <- strconv.Itoa(n)
			}
		}()
	}
	crashtest.Acks(out)
}

func TestCrashPush(t *testing.T) {
	dir := t.TempDir()
	acked := map[int]bool{}
	for crash := range 4 {
		last, killed := crashtest.Run(t, "TestCrashPusher", []string{crashDirEnv + "=" + dir}, time.Duration(100+rand.IntN(300))*time.Millisecond,
			func(v string) {
				n, _ := strconv.Atoi(v)
				acked[n] = true
			})
		if last != "" {
			t.Fatalf("pusher: %s", last)
		}
		if !killed {
			t.Fatal("pusher ended without being killed")
		}
		db, s := crashStore(t, dir)
		for u := range crashUsers {
			held := map[string]bool{}
			var before timeline.Entry
			for {
				p, err := s.Page(ctx, fmt.Sprintf("u%d", u), before, 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range p.Entries {
					held[e.PostID] = true
				}
				if len(p.Entries) < 100 {
					break
				}
				before = p.Entries[len(p.Entries)-1]
			}
			for n := range acked {
				if !held[crashEntry(n).PostID] {
					t.Fatalf("crash %d: u%d's timeline lacks acknowledged post %d (%d acknowledged, %d held)", crash, u, n, len(acked), len(held))
				}
			}
		}
		s.Close()
		db.Close()
		t.Logf("crash %d: %d pushes acknowledged in all, every one in all %d timelines", crash, len(acked), crashUsers)
	}
}
