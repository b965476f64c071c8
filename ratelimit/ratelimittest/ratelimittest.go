// Package ratelimittest is the conformance suite of ratelimit.Limiter: every implementation must
// pass Run.
package ratelimittest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery/ratelimit"
)

// Run checks l. Keys begin with prefix (unique per run). The checks wait on the real clock (about
// two seconds in all), as the Redis Limiter reads Redis's own.
func Run(t *testing.T, l ratelimit.Limiter, prefix string) {
	ctx := context.Background()
	allow := func(key string, p ratelimit.Policy) ratelimit.Decision {
		t.Helper()
		d, err := l.Allow(ctx, prefix+key, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("the quota at once, then refused with a retry time", func(t *testing.T) {
		p := ratelimit.Policy{Quota: 5, Window: 10 * time.Second}
		for i := range 5 {
			d := allow("burst", p)
			if !d.Allowed || d.Remaining != 4-i {
				t.Fatalf("request %d: %+v; want allowed, %d remaining", i+1, d, 4-i)
			}
			if d.ResetAfter <= 0 || d.ResetAfter > p.Window {
				t.Fatalf("request %d: reset after %v", i+1, d.ResetAfter)
			}
		}
		d := allow("burst", p)
		if d.Allowed || d.Remaining != 0 {
			t.Fatalf("request 6: %+v; want refused, 0 remaining", d)
		}
		// One request's share of the window (2 s) comes back first.
		if d.RetryAfter <= time.Second || d.RetryAfter > 2*time.Second {
			t.Fatalf("retry after %v; want about 2s", d.RetryAfter)
		}
	})
	t.Run("refused requests draw nothing; a caller that waits is allowed", func(t *testing.T) {
		p := ratelimit.Policy{Quota: 2, Window: 2 * time.Second}
		allow("wait", p)
		allow("wait", p)
		var d ratelimit.Decision
		for range 10 {
			if d = allow("wait", p); d.Allowed {
				t.Fatalf("refused requests let a third one in: %+v", d)
			}
		}
		time.Sleep(d.RetryAfter + 50*time.Millisecond)
		if d := allow("wait", p); !d.Allowed {
			t.Fatalf("after waiting the retry time: %+v", d)
		}
	})
	t.Run("keys and policies are separate", func(t *testing.T) {
		p := ratelimit.Policy{Quota: 1, Window: time.Minute}
		for i := range 3 {
			if d := allow(fmt.Sprintf("k%d", i), p); !d.Allowed {
				t.Fatalf("key %d: %+v", i, d)
			}
		}
		if d := allow("k0", p); d.Allowed {
			t.Fatalf("a second request on k0 allowed: %+v", d)
		}
	})
	t.Run("the zero policy limits nothing", func(t *testing.T) {
		for range 100 {
			if d := allow("off", ratelimit.Policy{}); !d.Allowed {
				t.Fatalf("%+v", d)
			}
		}
	})
}
