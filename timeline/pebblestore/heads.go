package pebblestore

import (
	"hash/maphash"
	"sync"

	"github.com/rookery/rookery/timeline"
)

// DefaultHeadCache is how many timelines' newest entries a Store keeps in memory by default: a few
// megabytes (headEntries entries each).
const DefaultHeadCache = 4096

// headEntries is how many of a timeline's newest entries its head keeps: a first page of up to 50,
// or two of 20, without the engine.
const headEntries = 50

// A head is what a read of a timeline's newest entries saw in the engine: its marker and
// its newest entries, newest first. all says the entries are every entry a read may ever show
// (the rest are below the floor or past their TTL).
type head struct {
	marked  bool // the marker exists
	mark    mark
	entries []headEntry
	all     bool
}

type headEntry struct {
	key []byte // the engine key: the floor's test (mark.below) needs it
	e   timeline.Entry
}

// headCache keeps the heads of recently read timelines, so that reading a feed's first page needs
// no iterator over the engine's levels. It is coherent with the engine because this Store writes
// every marker and entry of its engine (one Store per engine) and, after each batch commits, drops
// the heads of the timelines the batch wrote (drop). A reader that missed adds the head it read
// only if no write dropped anything in the user's shard since it looked (the shard's epoch):
// otherwise what it read may be older than that write.
//
// A head holds raw marker and entries, so each read applies the clock (the marker's liveness, the
// TTL) as a read from the engine does.
type headCache struct {
	seed   maphash.Seed
	max    int // heads per shard; 0: the cache is off
	shards [headShards]headShard
}

const headShards = 64

type headShard struct {
	mu    sync.Mutex
	epoch uint64
	m     map[string]*head
}

func newHeadCache(max int) *headCache {
	c := &headCache{seed: maphash.MakeSeed()}
	if max > 0 {
		c.max = max/headShards + 1
	}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*head)
	}
	return c
}

func (c *headCache) shard(user string) *headShard {
	return &c.shards[maphash.String(c.seed, user)%headShards]
}

// get returns user's head, or nil and the epoch to pass to add. A head is never modified.
func (c *headCache) get(user string) (*head, uint64) {
	if c.max == 0 {
		return nil, 0
	}
	s := c.shard(user)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[user], s.epoch
}

// add keeps h as user's head, read from the engine after get returned epoch, unless a write has
// dropped a head in the shard since.
func (c *headCache) add(user string, h *head, epoch uint64) {
	if c.max == 0 {
		return
	}
	s := c.shard(user)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch {
		return
	}
	for u := range s.m { // room, evicting in the map's random order
		if len(s.m) < c.max {
			break
		}
		delete(s.m, u)
	}
	s.m[user] = h
}

// drop forgets the heads of users, whose timelines a committed batch wrote.
func (c *headCache) drop(users ...string) {
	if c.max == 0 {
		return
	}
	for _, u := range users {
		s := c.shard(u)
		s.mu.Lock()
		s.epoch++
		delete(s.m, u)
		s.mu.Unlock()
	}
}
