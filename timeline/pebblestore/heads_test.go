package pebblestore_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/clocktest"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
)

// TestHeadCacheMatchesEngine: a store that keeps timelines' heads (a small cache, so heads are
// also evicted) answers every page as a store that keeps none does, through random sequences of
// every write (pushes, trims past the cap, removals, floors, builds, deletes), reads of first and
// later pages between them, and the clock moving (TTL, inactivity).
func TestHeadCacheMatchesEngine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := clocktest.New(time.Now().UTC().Truncate(time.Second))
		// A cap of 8 trims often; one of 80 lets a timeline hold more than a head (50 entries).
		limits := timeline.Limits{Cap: rapid.SampledFrom([]int{8, 80}).Draw(rt, "cap"), TTL: time.Hour, InactiveAfter: 3 * time.Hour}
		cached := open(t, openStore(t, clock), pebblestore.Options{Limits: limits, Clock: clock, SweepEvery: -1, HeadCache: 2})
		plain := open(t, openStore(t, clock), pebblestore.Options{Limits: limits, Clock: clock, SweepEvery: -1, HeadCache: -1})
		stores := []*pebblestore.Store{cached, plain}
		users := []string{"u1", "u2", "u3"}
		t0 := clock.Now()
		entry := func(n int) timeline.Entry {
			return timeline.Entry{PostID: fmt.Sprintf("P%03d", n), AuthorID: fmt.Sprintf("A%d", n%3), At: t0.Add(time.Duration(n) * time.Second)}
		}
		user := rapid.SampledFrom(users)
		post := rapid.IntRange(0, 100)
		entries := func(rt *rapid.T) []timeline.Entry {
			var es []timeline.Entry
			for _, n := range rapid.SliceOfN(post, 0, 12).Draw(rt, "entries") {
				es = append(es, entry(n))
			}
			return es
		}
		both := func(what string, f func(s *pebblestore.Store) error) {
			for _, s := range stores {
				if err := f(s); err != nil {
					rt.Fatalf("%s: %v", what, err)
				}
			}
		}
		builds := map[string][2]string{} // a user's build in each store
		read := func(rt *rapid.T, u string) {
			limit := rapid.SampledFrom([]int{1, 3, 12, 20, 50, 70, 100}).Draw(rt, "limit")
			var before timeline.Entry
			for range 3 { // a first page and two more
				var pages [2]timeline.Page
				for i, s := range stores {
					p, err := s.Page(ctx, u, before, limit)
					if err != nil {
						rt.Fatal(err)
					}
					pages[i] = p
				}
				if pages[0].Exists != pages[1].Exists || !slices.Equal(pages[0].Entries, pages[1].Entries) {
					rt.Fatalf("%s's page before %q (limit %d): with heads %+v; from the engine %+v", u, before.PostID, limit, pages[0], pages[1])
				}
				if len(pages[0].Entries) < limit {
					return
				}
				before = pages[0].Entries[len(pages[0].Entries)-1]
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"read": func(rt *rapid.T) { read(rt, user.Draw(rt, "user")) },
			"create": func(rt *rapid.T) {
				u, es := user.Draw(rt, "user"), entries(rt)
				both("create", func(s *pebblestore.Store) error { return s.Create(ctx, u, es) })
			},
			"create long": func(rt *rapid.T) { // more entries than a head holds
				u, n := user.Draw(rt, "user"), rapid.IntRange(40, 70).Draw(rt, "n")
				var es []timeline.Entry
				for i := range n {
					es = append(es, entry(i))
				}
				both("create", func(s *pebblestore.Store) error { return s.Create(ctx, u, es) })
			},
			"push": func(rt *rapid.T) {
				us := rapid.SliceOfNDistinct(user, 1, 3, rapid.ID).Draw(rt, "users")
				e := entry(post.Draw(rt, "post"))
				both("push", func(s *pebblestore.Store) error { return s.Push(ctx, us, e) })
			},
			"remove": func(rt *rapid.T) {
				u, p := user.Draw(rt, "user"), entry(post.Draw(rt, "post")).PostID
				both("remove", func(s *pebblestore.Store) error { return s.Remove(ctx, u, p) })
			},
			"remove author": func(rt *rapid.T) {
				u, a := user.Draw(rt, "user"), fmt.Sprintf("A%d", rapid.IntRange(0, 2).Draw(rt, "author"))
				both("remove author", func(s *pebblestore.Store) error { return s.RemoveAuthor(ctx, u, a) })
			},
			"remove post": func(rt *rapid.T) {
				p := entry(post.Draw(rt, "post")).PostID
				both("remove post", func(s *pebblestore.Store) error { return s.RemovePost(ctx, p) })
			},
			"drop older": func(rt *rapid.T) {
				u, e := user.Draw(rt, "user"), entry(post.Draw(rt, "post"))
				both("drop older", func(s *pebblestore.Store) error { return s.DropOlder(ctx, u, e) })
			},
			"merge": func(rt *rapid.T) {
				u, es := user.Draw(rt, "user"), entries(rt)
				both("merge", func(s *pebblestore.Store) error { return s.Merge(ctx, u, es) })
			},
			"delete": func(rt *rapid.T) {
				u := user.Draw(rt, "user")
				both("delete", func(s *pebblestore.Store) error { return s.Delete(ctx, u) })
			},
			"begin": func(rt *rapid.T) {
				u := user.Draw(rt, "user")
				var b [2]string
				for i, s := range stores {
					build, err := s.Begin(ctx, u)
					if err != nil {
						rt.Fatal(err)
					}
					b[i] = build
				}
				builds[u] = b
			},
			"complete": func(rt *rapid.T) {
				u, es := user.Draw(rt, "user"), entries(rt)
				floor := entry(post.Draw(rt, "floor"))
				b, ok := builds[u]
				if !ok || b[0] == "" || b[1] == "" {
					// Not a skipped test: rapid drops this one action (nothing to complete without
					// an open build) and draws another.
					rt.Skip("no build")
				}
				var done [2]bool
				for i, s := range stores {
					ok, err := s.Complete(ctx, u, b[i], es, floor)
					if err != nil {
						rt.Fatal(err)
					}
					done[i] = ok
				}
				if done[0] != done[1] {
					rt.Fatalf("complete: %v with heads, %v without", done[0], done[1])
				}
			},
			"time passes": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(1, 90).Draw(rt, "minutes")) * time.Minute)
			},
			"sweep": func(rt *rapid.T) {
				both("sweep", func(s *pebblestore.Store) error { return s.Sweep(ctx) })
			},
			"": func(rt *rapid.T) {
				for _, u := range users {
					read(rt, u)
				}
			},
		})
	})
}

// TestHeadCacheReadsArePushed: a first page read after a push returned shows the pushed entry,
// however reads that fill heads and pushes that drop them interleave.
func TestHeadCacheReadsArePushed(t *testing.T) {
	s := open(t, openStore(t, rookery.SystemClock), pebblestore.Options{SweepEvery: -1})
	users := []string{"u1", "u2", "u3", "u4"}
	for _, u := range users {
		if err := s.Create(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	var pushed atomic.Int64 // the newest entry a push returned for (entry n is at t0 + n ms)
	pushed.Store(-1)
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 4 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				want := pushed.Load()
				p, err := s.Page(ctx, users[r], timeline.Entry{}, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if want >= 0 && (len(p.Entries) == 0 || p.Entries[0].At.Before(t0.Add(time.Duration(want)*time.Millisecond))) {
					t.Errorf("%s read %v after entry %d was pushed", users[r], p.Entries, want)
					return
				}
			}
		})
	}
	for n := range 2000 {
		e := timeline.Entry{PostID: fmt.Sprintf("P%05d", n), AuthorID: "A", At: t0.Add(time.Duration(n) * time.Millisecond)}
		if err := s.Push(ctx, users, e); err != nil {
			t.Fatal(err)
		}
		pushed.Store(int64(n))
	}
	close(done)
	readers.Wait()
}

// TestHeadCacheRacingRemovals: pushes racing removals of their posts and authors, and readers
// filling heads meanwhile, leave the heads coherent: once the writers stop, every first page of the
// store equals one read by a store without heads on the same engine. (The interleaving that needs
// the push's shard check is too narrow to hit here reliably; TestHeadCachePushAfterRemoval plays it
// step by step.)
func TestHeadCacheRacingRemovals(t *testing.T) {
	db := openStore(t, rookery.SystemClock)
	s := open(t, db, pebblestore.Options{SweepEvery: -1})
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6"}
	for _, u := range users {
		if err := s.Create(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	entry := func(n int) timeline.Entry {
		return timeline.Entry{PostID: fmt.Sprintf("P%05d", n), AuthorID: fmt.Sprintf("A%d", n%4), At: t0.Add(time.Duration(n) * time.Millisecond)}
	}
	const posts = 1000
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	for r := range 3 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Page(ctx, users[(r+i)%len(users)], timeline.Entry{}, 20); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Go(func() {
		for n := range posts {
			if err := s.Push(ctx, users, entry(n)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	writers.Go(func() { // removes posts just pushed, or about to be
		for n := 0; n < posts; n += 3 {
			if err := s.RemovePost(ctx, entry(n).PostID); err != nil {
				t.Error(err)
				return
			}
		}
	})
	writers.Go(func() {
		for i := range posts / 10 {
			if err := s.RemoveAuthor(ctx, users[i%len(users)], fmt.Sprintf("A%d", i%4)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	writers.Wait()
	close(stop)
	readers.Wait()
	plain := open(t, db, pebblestore.Options{SweepEvery: -1, HeadCache: -1})
	for _, u := range users {
		for _, limit := range []int{20, 50} {
			got, err := s.Page(ctx, u, timeline.Entry{}, limit)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Page(ctx, u, timeline.Entry{}, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Entries, want.Entries) {
				t.Errorf("%s's first page of %d: with heads %v, from the engine %v", u, limit, got.Entries, want.Entries)
			}
		}
	}
}
