// Package ratelimit limits how often a caller may call the API (OWASP API4: unrestricted resource
// consumption). A Policy is a quota of requests per window; a caller's requests draw on a bucket
// that holds up to the quota and refills at quota/window, continuously (GCRA, the generic cell rate
// algorithm: a token bucket kept as one timestamp). So a caller may spend the whole quota at once,
// then keeps the policy's average rate.
//
// Two Limiters: Memory (golang.org/x/time/rate, one process: the embedded default) and, in
// ratelimit/redis, one on Redis (github.com/go-redis/redis_rate: every process of a deployment
// shares the counts). ratelimittest checks both the same way.
package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rookery/rookery"
)

// Policy is a quota of requests per window. The zero Policy limits nothing.
type Policy struct {
	Quota  int
	Window time.Duration
}

// Unlimited reports whether p limits nothing.
func (p Policy) Unlimited() bool { return p.Quota <= 0 || p.Window <= 0 }

// String is p as ParsePolicy reads it.
func (p Policy) String() string {
	if p.Unlimited() {
		return "off"
	}
	return fmt.Sprintf("%d/%s", p.Quota, p.Window)
}

// ParsePolicy reads "QUOTA/WINDOW" (600/1m: 600 requests a minute) or "off".
func ParsePolicy(s string) (Policy, error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		return Policy{}, nil
	}
	q, w, ok := strings.Cut(s, "/")
	n, err1 := strconv.Atoi(q)
	d, err2 := time.ParseDuration(w)
	if !ok || err1 != nil || err2 != nil || n <= 0 || d < time.Second {
		return Policy{}, fmt.Errorf("%q is not QUOTA/WINDOW (such as 600/1m; a window of 1s or more) or off", s)
	}
	return Policy{Quota: n, Window: d}, nil
}

// Decision is what a Limiter decided about one request.
type Decision struct {
	Allowed   bool
	Remaining int // requests the caller may make now, after this one
	// RetryAfter is, for a refused request, the time until one more would be allowed.
	RetryAfter time.Duration
	// ResetAfter is the time until the caller's bucket is full again (the whole quota available).
	ResetAfter time.Duration
}

// Limiter decides, per key, whether one more request is within a policy. Refused requests draw
// nothing: a caller that waits RetryAfter is allowed. Errors are *rookery.Error (Unavailable when
// the backing store does not answer).
type Limiter interface {
	Allow(ctx context.Context, key string, p Policy) (Decision, error)
}

// Memory is the in-process Limiter. Buckets idle for longer than their window are full again, so
// they are forgotten (swept now and then), which bounds memory by the callers of the last window.
type Memory struct {
	clock  rookery.Clock
	seed   maphash.Seed
	shards [64]memShard
}

type memShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	lim    *rate.Limiter
	policy Policy
	last   time.Time
}

// NewMemory returns an in-process Limiter on clock (nil: the system clock).
func NewMemory(clock rookery.Clock) *Memory {
	if clock == nil {
		clock = rookery.SystemClock
	}
	m := &Memory{clock: clock, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].buckets = map[string]*bucket{}
	}
	return m
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string, p Policy) (Decision, error) {
	if p.Unlimited() {
		return Decision{Allowed: true, Remaining: -1}, nil
	}
	now := m.clock.Now()
	every := p.Window / time.Duration(p.Quota) // the time one request's token takes to come back
	sh := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.calls++; sh.calls%1024 == 0 {
		for k, b := range sh.buckets {
			if now.Sub(b.last) > b.policy.Window {
				delete(sh.buckets, k)
			}
		}
	}
	b := sh.buckets[key]
	if b == nil || b.policy != p {
		b = &bucket{lim: rate.NewLimiter(rate.Every(every), p.Quota), policy: p}
		sh.buckets[key] = b
	}
	b.last = now
	d := Decision{Allowed: b.lim.AllowN(now, 1)}
	tokens := b.lim.TokensAt(now)
	d.Remaining = max(int(tokens), 0)
	if !d.Allowed {
		d.RetryAfter = time.Duration((1 - tokens) * float64(every))
	}
	d.ResetAfter = time.Duration((float64(p.Quota) - tokens) * float64(every))
	return d, nil
}
