package pebblestore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

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
//
// TestCrashUnsyncedPush does the same with Options.Unsynced, where nothing is synced and what
// stands for a push is a later write to the same engine (the event log's consumer offset): each
// child goroutine writes its last pushed post to a key of its own, unsynced, after each Push. After
// reopening, every post up to the one a surviving key names is in every timeline.

const (
	crashDirEnv      = "ROOKERY_TIMELINE_CRASH_DIR"
	crashRoundEnv    = "ROOKERY_TIMELINE_CRASH_ROUND"    // the child's round: its posts are its own
	crashUnsyncedEnv = "ROOKERY_TIMELINE_CRASH_UNSYNCED" // set for the unsynced child
)

const crashUsers = 20

var crashT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func crashStore(t testing.TB, dir string, unsynced bool) (*pebble.DB, *pebblestore.Store) {
	db, err := pebble.Open(pebble.Options{Dir: dir, Schema: app.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// A cap no test reaches and a TTL no entry passes: every push stays.
	return db, pebblestore.New(db.Engine(), pebblestore.Options{Limits: timeline.Limits{Cap: 1 << 20, TTL: 100 * 365 * 24 * time.Hour}, SweepEvery: -1, Unsynced: unsynced})
}

// offsetKey is the key where the unsynced child's goroutine w of round r writes its last post, as
// a consumer group writes its offset (in a key space neither the store nor the timelines use).
func offsetKey(r, w int) []byte { return fmt.Appendf(nil, "zoffset-%d-%d", r, w) }

// crashPost is the n-th post of goroutine w in round r.
func crashPost(r, w, n int) int { return r<<24 + n*4 + w }

func crashEntry(n int) timeline.Entry {
	return timeline.Entry{PostID: fmt.Sprintf("P%09d", n), AuthorID: "a", At: crashT0.Add(time.Duration(n) * time.Millisecond)}
}

// TestCrashPusher is the child: it does nothing unless started by TestCrashPush.
func TestCrashPusher(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	r, _ := strconv.Atoi(os.Getenv(crashRoundEnv))
	_, unsynced := os.LookupEnv(crashUnsyncedEnv)
	db, s := crashStore(t, dir, unsynced)
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
	out := make(chan string, 1024)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				n := crashPost(r, w, i)
				if err := s.Push(ctx, users, crashEntry(n)); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				if unsynced {
					if err := db.Engine().Set(offsetKey(r, w), []byte(strconv.Itoa(i)), cpebble.NoSync); err != nil {
						fmt.Println("error", err)
						os.Exit(2)
					}
				}
				out <- strconv.Itoa(n)
			}
		}()
	}
	crashtest.Acks(out)
}

// held returns the posts in user's timeline.
func held(t *testing.T, s *pebblestore.Store, user string) map[string]bool {
	out := map[string]bool{}
	var before timeline.Entry
	for {
		p, err := s.Page(ctx, user, before, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			out[e.PostID] = true
		}
		if len(p.Entries) < 100 {
			return out
		}
		before = p.Entries[len(p.Entries)-1]
	}
}

func TestCrashUnsyncedPush(t *testing.T) {
	dir := t.TempDir()
	for r := range 4 {
		acked := 0
		env := []string{crashDirEnv + "=" + dir, crashRoundEnv + "=" + strconv.Itoa(r), crashUnsyncedEnv + "=1"}
		last, killed := crashtest.Run(t, "TestCrashPusher", env, time.Duration(100+rand.IntN(300))*time.Millisecond, func(string) { acked++ })
		if last != "" {
			t.Fatalf("pusher: %s", last)
		}
		if !killed {
			t.Fatal("pusher ended without being killed")
		}
		db, s := crashStore(t, dir, true)
		var posts []int
		for w := range 4 {
			v, closer, err := db.Engine().Get(offsetKey(r, w))
			if err == cpebble.ErrNotFound {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			upTo, _ := strconv.Atoi(string(v))
			closer.Close()
			for i := 0; i <= upTo; i++ {
				posts = append(posts, crashPost(r, w, i))
			}
		}
		for u := range crashUsers {
			got := held(t, s, fmt.Sprintf("u%d", u))
			for _, n := range posts {
				if !got[crashEntry(n).PostID] {
					t.Fatalf("round %d: u%d's timeline lacks post %d, which a surviving offset covers", r, u, n)
				}
			}
		}
		s.Close()
		db.Close()
		t.Logf("round %d: %d pushes made, %d covered by surviving offsets, each in all %d timelines", r, acked, len(posts), crashUsers)
	}
}

func TestCrashPush(t *testing.T) {
	dir := t.TempDir()
	acked := map[int]bool{}
	for crash := range 4 {
		env := []string{crashDirEnv + "=" + dir, crashRoundEnv + "=" + strconv.Itoa(crash)}
		last, killed := crashtest.Run(t, "TestCrashPusher", env, time.Duration(100+rand.IntN(300))*time.Millisecond,
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
		db, s := crashStore(t, dir, false)
		for u := range crashUsers {
			got := held(t, s, fmt.Sprintf("u%d", u))
			for n := range acked {
				if !got[crashEntry(n).PostID] {
					t.Fatalf("crash %d: u%d's timeline lacks acknowledged post %d (%d acknowledged, %d held)", crash, u, n, len(acked), len(got))
				}
			}
		}
		s.Close()
		db.Close()
		t.Logf("crash %d: %d pushes acknowledged in all, every one in all %d timelines", crash, len(acked), crashUsers)
	}
}
