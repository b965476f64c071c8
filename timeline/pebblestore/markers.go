package pebblestore

import "sync"

// DefaultMarkerCache is how many timelines' markers a Store remembers by default: a few tens of
// megabytes at most.
const DefaultMarkerCache = 250_000

// markerCache remembers timelines' marker values (expiry in Unix ms; 0: no marker), so that a push
// need not seek every follower's marker in the engine. The Store is the only writer of markers in
// its engine and tells the cache each marker it wrote, once the write committed (set). A value read
// from the engine is added only if the user has no value yet and the cache was not emptied since
// the read began (fill, with the generation lookup returned): a value read before a write
// committed then never replaces the write's. When it holds max values, the cache empties itself.
//
// A cache loaded with every marker of its engine before the Store's first write (load) is
// complete: a user it has no value for has no marker, so a push reads no marker from the engine,
// not even those of the followers it has not met since the process started (most followers, on
// a large graph, have no timeline). Since every marker written is set, it stays complete until it
// empties itself.
type markerCache struct {
	max int // 0 or less: the cache is off

	mu       sync.RWMutex
	m        map[string]int64
	gen      uint64
	complete bool // m holds every marker of the engine (absent: no marker)
}

func newMarkerCache(max int) *markerCache {
	return &markerCache{max: max, m: map[string]int64{}}
}

// lookup sets vals[i] to the cached value of users[i] and returns the indexes of the users it has
// none for, and the generation to fill them with.
func (c *markerCache) lookup(users []string, vals []int64) (missing []int, gen uint64) {
	if c.max <= 0 {
		missing = make([]int, len(users))
		for i := range users {
			missing[i] = i
		}
		return missing, 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, u := range users {
		v, ok := c.m[u]
		if !ok && !c.complete {
			missing = append(missing, i)
		}
		vals[i] = v
	}
	return missing, c.gen
}

// none tells whether the cache knows that user has no marker: it is complete and holds no value
// of theirs (or 0).
func (c *markerCache) none(user string) bool {
	if c.max <= 0 {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.complete && c.m[user] == 0
}

// load fills an empty cache with each marker that next yields (user, expiry), and makes it
// complete if they all fit. Call it before the Store writes anything.
func (c *markerCache) load(next func() (user string, exp int64, ok bool, err error)) error {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		u, exp, ok, err := next()
		if err != nil || !ok {
			c.complete = err == nil
			return err
		}
		if len(c.m) == c.max {
			return nil // more markers than fit: the rest are read when met
		}
		c.m[u] = exp
	}
}

// fill adds the values of users read from the engine since lookup returned gen, where no value
// is cached yet.
func (c *markerCache) fill(gen uint64, users []string, vals []int64) {
	if c.max <= 0 || len(users) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, u := range users {
		if _, ok := c.m[u]; ok {
			continue // written since the read began: newer than vals[i]
		}
		if c.room(); gen != c.gen {
			// Emptied since the read began (perhaps just now, to make room): it may have
			// forgotten values written since, which vals must not replace.
			return
		}
		c.m[u] = vals[i]
	}
}

// set records the marker value of a write to user's marker that has committed.
func (c *markerCache) set(user string, v int64) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[user]; !ok {
		c.room()
	}
	c.m[user] = v
}

// room empties the cache if one more value would not fit. Call it with mu held.
func (c *markerCache) room() {
	if len(c.m) >= c.max {
		c.m = map[string]int64{}
		c.gen++
		c.complete = false
	}
}
