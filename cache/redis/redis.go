// Package redis is the cache.Cache and cache.Limiter on Redis (seed 001: streak state cached
// write-through as streak:{user_id}, rate limits as INCR/EXPIRE counters), shared by every Rookery
// process of a deployment. Each operation is one single-key script, so keys may live on any node of
// a Redis Cluster.
package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
)

// Store is a cache.Cache and cache.Limiter on one Redis (or cluster) under a key prefix.
type Store struct {
	c      goredis.UniversalClient
	prefix string
}

// New returns the Store over c whose keys all begin with prefix.
func New(c goredis.UniversalClient, prefix string) *Store { return &Store{c: c, prefix: prefix} }

func (s *Store) unavailable(op rookery.Op, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return rookery.E(op, rookery.Unavailable, "the cache is unavailable", err)
}

// set stores ARGV[2] at version ARGV[1] for ARGV[3] ms unless a newer version is held.
var set = goredis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and tonumber(cur) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

// valueKey is the Redis key of the cached value key.
func (s *Store) valueKey(key string) string { return s.prefix + ":c:" + key }

// Get implements cache.Cache.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	vals, err := s.GetMany(ctx, []string{key})
	if err != nil {
		return nil, false, err
	}
	return vals[0], vals[0] != nil, nil
}

// Set implements cache.Cache.
func (s *Store) Set(ctx context.Context, key string, version int64, val []byte, ttl time.Duration) error {
	return s.SetMany(ctx, []cache.Entry{{Key: key, Version: version, Val: val}}, ttl)
}

// GetMany implements cache.Cache, with one pipeline (on a cluster, one per node).
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make([]*goredis.StringCmd, len(keys))
	_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGet(ctx, s.valueKey(k), "d")
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, s.unavailable("redis.GetMany", err)
	}
	for i, c := range cmds {
		if b, err := c.Bytes(); err == nil {
			out[i] = b
		}
	}
	return out, nil
}

// SetMany implements cache.Cache, with one pipeline. The script is sent whole (EVAL, not
// EVALSHA): a pipeline cannot fall back when a server lacks it, and Redis caches it anyway.
func (s *Store) SetMany(ctx context.Context, entries []cache.Entry, ttl time.Duration) error {
	if len(entries) == 0 {
		return nil
	}
	ms := max(ttl.Milliseconds(), 1)
	_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, e := range entries {
			set.Eval(ctx, p, []string{s.valueKey(e.Key)}, e.Version, e.Val, ms)
		}
		return nil
	})
	if err != nil {
		return s.unavailable("redis.SetMany", err)
	}
	return nil
}

// allow counts one event in the window KEYS[1] of ARGV[1] ms and returns the count and the
// window's remaining ms.
var allow = goredis.NewScript(`
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`)

// Allow implements cache.Limiter.
func (s *Store) Allow(ctx context.Context, key string, limit int, per time.Duration) (bool, time.Duration, error) {
	res, err := allow.Run(ctx, s.c, []string{s.prefix + ":rl:" + key}, max(per.Milliseconds(), 1)).Int64Slice()
	if err != nil {
		return false, 0, s.unavailable("redis.Allow", err)
	}
	if res[0] > int64(limit) {
		return false, time.Duration(res[1]) * time.Millisecond, nil
	}
	return true, 0, nil
}

// Drop deletes every key under the Store's prefix (for tests).
func (s *Store) Drop(ctx context.Context) error {
	iter := s.c.Scan(ctx, 0, s.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := s.c.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
