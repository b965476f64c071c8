// Package cache holds the two small shared-state services the engagement features use besides the
// table (seed 001's ElastiCache): a write-through cache of versioned values, and fixed-window rate
// limit counters. Both have an in-process implementation here, used when no Redis is configured, and
// one on Redis (cache/redis) for several Rookery processes; cachetest checks both the same way.
package cache

import (
	"context"
	"sync"
	"time"

	"github.com/rookery/rookery"
)

// Cache keeps versioned values for a while. It is a write-through cache: the owner writes the table
// first and then Sets the new version, so a reader finds either nothing or a value that was true
// at its version. Versions make racing writers safe: an older version never replaces a newer one.
type Cache interface {
	// Get returns the value under key, if one is cached and not expired.
	Get(ctx context.Context, key string) (val []byte, ok bool, err error)
	// Set caches val at version under key for ttl, unless a newer version is cached; an equal
	// version is replaced.
	Set(ctx context.Context, key string, version int64, val []byte, ttl time.Duration) error
	// GetMany is Get for several keys in one round trip: the values in keys' order, nil for each
	// miss.
	GetMany(ctx context.Context, keys []string) ([][]byte, error)
	// SetMany is Set for several entries, each for ttl, in one round trip.
	SetMany(ctx context.Context, entries []Entry, ttl time.Duration) error
}

// Entry is one versioned value to Set.
type Entry struct {
	Key     string
	Version int64
	Val     []byte
}

// Limiter counts events per key in fixed windows of time.
type Limiter interface {
	// Allow counts one event for key in the current window of length per and reports whether the
	// window's count is within limit; if it is not, retryAfter is the time until the window ends.
	// Events that are refused count too (a client that keeps trying stays refused).
	Allow(ctx context.Context, key string, limit int, per time.Duration) (ok bool, retryAfter time.Duration, err error)
}

// Memory is the in-process Cache and Limiter, for one Rookery process.
type Memory struct {
	values *Versions[[]byte]

	mu      sync.Mutex // guards windows and calls
	clock   rookery.Clock
	windows map[string]memWindow
	calls   int
}

type memWindow struct {
	start time.Time
	count int
}

// NewMemory returns an in-process cache of at most maxEntries values (0 means 100,000) on clock.
func NewMemory(clock rookery.Clock, maxEntries int) *Memory {
	return &Memory{values: NewVersions[[]byte](clock, maxEntries), clock: clock, windows: map[string]memWindow{}}
}

// Get implements Cache.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, bool, error) {
	vals, _ := m.GetMany(ctx, []string{key})
	return vals[0], vals[0] != nil, nil
}

// GetMany implements Cache.
func (m *Memory) GetMany(_ context.Context, keys []string) ([][]byte, error) {
	out, found := m.values.GetMany(keys)
	for i, v := range out {
		if found[i] {
			out[i] = append([]byte{}, v...) // an empty value is not a miss
		}
	}
	return out, nil
}

// Set implements Cache.
func (m *Memory) Set(ctx context.Context, key string, version int64, val []byte, ttl time.Duration) error {
	return m.SetMany(ctx, []Entry{{Key: key, Version: version, Val: val}}, ttl)
}

// SetMany implements Cache.
func (m *Memory) SetMany(_ context.Context, entries []Entry, ttl time.Duration) error {
	vs := make([]Versioned[[]byte], len(entries))
	for i, e := range entries {
		vs[i] = Versioned[[]byte]{Key: e.Key, Version: e.Version, Val: append([]byte(nil), e.Val...)}
	}
	m.values.SetMany(vs, ttl)
	return nil
}

// Versions keeps versioned values of type V in process, each for a TTL, by Cache's rule: an older
// version never replaces a newer one (an expired one does not count), an equal one is replaced.
// Memory keeps its values in one; a caller that keeps decoded values (whose readers share them,
// and must not change them) uses one directly.
type Versions[V any] struct {
	clock rookery.Clock
	max   int

	mu     sync.Mutex
	values map[string]version[V]
}

type version[V any] struct {
	version int64
	val     V
	expires time.Time
}

// Versioned is one value to set in a Versions.
type Versioned[V any] struct {
	Key     string
	Version int64
	Val     V
}

// NewVersions returns a Versions of at most maxEntries values (0 means 100,000) on clock; when it is
// full, some values are evicted (Go's map order: random).
func NewVersions[V any](clock rookery.Clock, maxEntries int) *Versions[V] {
	if maxEntries <= 0 {
		maxEntries = 100_000
	}
	return &Versions[V]{clock: clock, max: maxEntries, values: map[string]version[V]{}}
}

// GetMany returns the values of keys that are kept and not expired, in keys' order, and which were.
func (m *Versions[V]) GetMany(keys []string) (vals []V, found []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	vals, found = make([]V, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		if v, ok := m.values[k]; ok && now.Before(v.expires) {
			vals[i], found[i] = v.val, true
		}
	}
	return vals, found
}

// SetMany keeps each of vs for ttl, unless a newer version of it is kept.
func (m *Versions[V]) SetMany(vs []Versioned[V], ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for _, v := range vs {
		if cur, ok := m.values[v.Key]; ok && cur.version > v.Version && now.Before(cur.expires) {
			continue
		}
		if _, ok := m.values[v.Key]; !ok && len(m.values) >= m.max {
			n := 0
			for k := range m.values {
				delete(m.values, k)
				if n++; n >= m.max/16+1 {
					break
				}
			}
		}
		m.values[v.Key] = version[V]{version: v.Version, val: v.Val, expires: now.Add(ttl)}
	}
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string, limit int, per time.Duration) (bool, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if m.calls++; m.calls%4096 == 0 { // forget ended windows now and then
		for k, w := range m.windows {
			if now.Sub(w.start) >= per {
				delete(m.windows, k)
			}
		}
	}
	w := m.windows[key]
	if now.Sub(w.start) >= per {
		w = memWindow{start: now}
	}
	w.count++
	m.windows[key] = w
	if w.count > limit {
		return false, w.start.Add(per).Sub(now), nil
	}
	return true, 0, nil
}

// Nop is a Cache that keeps nothing: every Get misses. It is the cache of processes that must not
// cache in process because other processes write the same items (API nodes beside workers).
type Nop struct{}

// Get implements Cache: always a miss.
func (Nop) Get(context.Context, string) ([]byte, bool, error) { return nil, false, nil }

// Set implements Cache: it keeps nothing.
func (Nop) Set(context.Context, string, int64, []byte, time.Duration) error { return nil }

// GetMany implements Cache: all misses.
func (Nop) GetMany(_ context.Context, keys []string) ([][]byte, error) {
	return make([][]byte, len(keys)), nil
}

// SetMany implements Cache: it keeps nothing.
func (Nop) SetMany(context.Context, []Entry, time.Duration) error { return nil }
