// Package redis is the ratelimit.Limiter on Redis, shared by every Rookery process of a
// deployment: GCRA by github.com/go-redis/redis_rate, one single-key script per request (keys may
// live on any node of a Redis Cluster). The script reads Redis's own clock, so processes need not
// agree on the time.
package redis

import (
	"context"
	"errors"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/ratelimit"
)

// Limiter is a ratelimit.Limiter whose buckets are Redis keys under a prefix.
type Limiter struct {
	l      *redis_rate.Limiter
	prefix string
}

// New returns the Limiter over c whose keys all begin with prefix.
func New(c goredis.UniversalClient, prefix string) *Limiter {
	return &Limiter{l: redis_rate.NewLimiter(c), prefix: prefix + ":"}
}

// Allow implements ratelimit.Limiter.
func (l *Limiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	if p.Unlimited() {
		return ratelimit.Decision{Allowed: true, Remaining: -1}, nil
	}
	res, err := l.l.Allow(ctx, l.prefix+key, redis_rate.Limit{Rate: p.Quota, Burst: p.Quota, Period: p.Window})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return ratelimit.Decision{}, err
		}
		return ratelimit.Decision{}, rookery.E("ratelimit.redis.Allow", rookery.Unavailable, "the rate limiter's Redis is unavailable", err)
	}
	d := ratelimit.Decision{Allowed: res.Allowed > 0, Remaining: max(res.Remaining, 0), ResetAfter: max(res.ResetAfter, 0)}
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, 0)
	}
	return d, nil
}

// Drop deletes the Limiter's keys (for tests; they expire by themselves once their buckets are
// full again).
func (l *Limiter) Drop(ctx context.Context, c goredis.UniversalClient) error {
	iter := c.Scan(ctx, 0, "rate:"+l.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
