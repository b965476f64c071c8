// Package cachetest is the conformance suite of cache.Cache and cache.Limiter: every
// implementation runs Run, on a fake clock, or RunWallClockExpiry when a server keeps the time.
package cachetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/internal/clocktest"
)

// Impl is one implementation under test.
type Impl interface {
	cache.Cache
	cache.Limiter
}

// Factory returns a fresh, empty implementation on clock.
type Factory func(t *testing.T, clock rookery.Clock) Impl

// Run runs the suite; each test gets a fresh implementation and a fake clock of its own
// (clocktest), which its expiry tests move on without waiting.
func Run(t *testing.T, open Factory) { run(t, open, false) }

// RunWallClockExpiry is Run for an implementation whose TTLs and windows a server keeps on its
// own clock (Redis), which no fake clock moves: the expiry tests wait as they move the fake clock.
func RunWallClockExpiry(t *testing.T, open Factory) { run(t, open, true) }

func run(t *testing.T, openOn Factory, wallClock bool) {
	ctx := context.Background()
	var clock *clocktest.Clock
	open := func(t *testing.T) Impl {
		clock = clocktest.New(time.Now())
		return openOn(t, clock)
	}
	pass := func(d time.Duration) {
		clock.Advance(d)
		if wallClock {
			time.Sleep(d)
		}
	}
	t.Run("a missing key is a miss", func(t *testing.T) {
		c := open(t)
		if _, ok, err := c.Get(ctx, "nobody"); ok || err != nil {
			t.Fatalf("Get = ok %v, err %v; want a miss", ok, err)
		}
	})
	t.Run("a set value is got until it expires", func(t *testing.T) {
		c := open(t)
		if err := c.Set(ctx, "k", 1, []byte("one"), 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		wantGet(t, c, "k", "one")
		pass(100 * time.Millisecond)
		wantGet(t, c, "k", "one")
		pass(200 * time.Millisecond)
		if _, ok, _ := c.Get(ctx, "k"); ok {
			t.Fatal("the value outlived its ttl")
		}
	})
	t.Run("an older version never replaces a newer one", func(t *testing.T) {
		c := open(t)
		must(t, c.Set(ctx, "k", 5, []byte("five"), time.Minute))
		must(t, c.Set(ctx, "k", 4, []byte("four"), time.Minute))
		wantGet(t, c, "k", "five")
		must(t, c.Set(ctx, "k", 5, []byte("five again"), time.Minute))
		wantGet(t, c, "k", "five again")
		must(t, c.Set(ctx, "k", 6, []byte("six"), time.Minute))
		wantGet(t, c, "k", "six")
	})
	t.Run("many at once: misses are nil, versions hold per key", func(t *testing.T) {
		c := open(t)
		must(t, c.Set(ctx, "b", 5, []byte("b5"), time.Minute))
		must(t, c.SetMany(ctx, []cache.Entry{{Key: "a", Version: 1, Val: []byte("a1")}, {Key: "b", Version: 4, Val: []byte("b4")},
			{Key: "c", Version: 0, Val: []byte{}}}, time.Minute))
		got, err := c.GetMany(ctx, []string{"a", "missing", "b", "c", "a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a1", "<nil>", "b5", "", "a1"}
		for i, g := range got {
			s := string(g)
			if g == nil {
				s = "<nil>"
			}
			if s != want[i] {
				t.Fatalf("GetMany[%d] = %q; want %q (all: %q)", i, s, want[i], got)
			}
		}
		if got, err := c.GetMany(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("GetMany(nil) = %q, %v", got, err)
		}
		must(t, c.SetMany(ctx, []cache.Entry{{Key: "a", Version: 2, Val: []byte("a2")}}, 150*time.Millisecond))
		wantGet(t, c, "a", "a2")
		pass(200 * time.Millisecond)
		if got, _ := c.GetMany(ctx, []string{"a"}); got[0] != nil {
			t.Fatal("a value set many outlived its ttl")
		}
	})
	t.Run("racing writers leave the newest version", func(t *testing.T) {
		c := open(t)
		var wg sync.WaitGroup
		for v := 1; v <= 50; v++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Set(ctx, "k", int64(v), fmt.Appendf(nil, "v%d", v), time.Minute); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		wantGet(t, c, "k", "v50")
	})
	t.Run("a limiter allows exactly the limit per window, even under concurrency", func(t *testing.T) {
		c := open(t)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, _, err := c.Allow(ctx, "user1", 20, time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					allowed.Add(1)
				}
			}()
		}
		wg.Wait()
		if allowed.Load() != 20 {
			t.Fatalf("allowed %d of 50 with limit 20", allowed.Load())
		}
		ok, after, err := c.Allow(ctx, "user1", 20, time.Minute)
		if ok || err != nil || after <= 0 || after > time.Minute {
			t.Fatalf("over the limit: ok %v, retry after %v, err %v; want refused with 0 < retry after <= 1m", ok, after, err)
		}
		if ok, _, _ := c.Allow(ctx, "user2", 20, time.Minute); !ok {
			t.Fatal("another key shares the window")
		}
	})
	t.Run("a new window allows again", func(t *testing.T) {
		c := open(t)
		for i := range 3 {
			ok, _, err := c.Allow(ctx, "k", 2, 200*time.Millisecond)
			if err != nil || ok != (i < 2) {
				t.Fatalf("call %d: ok %v err %v", i, ok, err)
			}
		}
		pass(300 * time.Millisecond)
		if ok, _, _ := c.Allow(ctx, "k", 2, 200*time.Millisecond); !ok {
			t.Fatal("refused in a new window")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantGet(t *testing.T, c cache.Cache, key, want string) {
	t.Helper()
	got, ok, err := c.Get(context.Background(), key)
	if err != nil || !ok || string(got) != want {
		t.Fatalf("Get(%q) = %q, %v, %v; want %q", key, got, ok, err, want)
	}
}
