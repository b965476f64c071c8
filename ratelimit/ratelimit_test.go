package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery/ratelimit"
	"github.com/rookery/rookery/ratelimit/ratelimittest"
)

func TestMemory(t *testing.T) {
	ratelimittest.Run(t, ratelimit.NewMemory(nil), "t:")
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]ratelimit.Policy{
		"600/1m": {Quota: 600, Window: time.Minute}, " 10/1s ": {Quota: 10, Window: time.Second},
		"off": {}, "0": {},
	} {
		if got, err := ratelimit.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "600", "600/", "/1m", "-1/1m", "600/1ms", "a/1m", "600/1x"} {
		if _, err := ratelimit.ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", bad)
		}
	}
}

// BenchmarkMemory: the cost the in-process limiter adds to a request, for one caller (a server
// token: every request on one key, from every core) and for many.
func BenchmarkMemory(b *testing.B) {
	p := ratelimit.Policy{Quota: 1 << 30, Window: time.Minute}
	b.Run("one key", func(b *testing.B) {
		m := ratelimit.NewMemory(nil)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Allow(context.Background(), "server:app", p)
			}
		})
	})
	b.Run("10k keys", func(b *testing.B) {
		m := ratelimit.NewMemory(nil)
		keys := make([]string, 10_000)
		for i := range keys {
			keys[i] = fmt.Sprintf("read:user%d", i)
		}
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				m.Allow(context.Background(), keys[i%len(keys)], p)
				i++
			}
		})
	})
}
