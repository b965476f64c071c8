package pebble

import (
	"slices"
	"strings"
	"sync"

	"github.com/rookery/rookery/table"
)

// keyLocks locks items by key: a write holds the locks of its keys from reading the current items
// until its batch is committed (synced), so that read-check-write is atomic per key. Only writes to
// the same key wait for each other; a transaction takes its keys' locks in key order, so
// transactions cannot deadlock. (Striped locks made unrelated transactions of 100 keys collide and
// hold each other up across their fsyncs, which serialized fan-out.)
type keyLocks struct {
	mu   sync.Mutex
	held map[table.Key]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int // writes holding or waiting for it; guarded by keyLocks.mu
}

// lock locks keys (duplicates allowed) and returns their release.
func (l *keyLocks) lock(keys []table.Key) (unlock func()) {
	ks := slices.Clone(keys)
	if len(ks) > 1 {
		slices.SortFunc(ks, func(a, b table.Key) int {
			if c := strings.Compare(a.PK, b.PK); c != 0 {
				return c
			}
			return strings.Compare(a.SK, b.SK)
		})
		ks = slices.Compact(ks)
	}
	locks := make([]*keyLock, len(ks))
	l.mu.Lock()
	if l.held == nil {
		l.held = map[table.Key]*keyLock{}
	}
	for i, k := range ks {
		kl := l.held[k]
		if kl == nil {
			kl = &keyLock{}
			l.held[k] = kl
		}
		kl.refs++
		locks[i] = kl
	}
	l.mu.Unlock()
	for _, kl := range locks {
		kl.Lock()
	}
	return func() {
		for _, kl := range locks {
			kl.Unlock()
		}
		l.mu.Lock()
		for i, kl := range locks {
			if kl.refs--; kl.refs == 0 {
				delete(l.held, ks[i])
			}
		}
		l.mu.Unlock()
	}
}
