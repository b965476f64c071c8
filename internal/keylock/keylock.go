// Package keylock locks by key: holders of the same key wait for each other, holders of different
// keys never do. Several keys are taken in order, so two holders cannot deadlock. (Striped locks
// make unrelated keys collide and wait across each other's fsyncs.)
package keylock

import (
	"slices"
	"sync"
)

// Set is a set of locks by key of type K; the zero value needs Compare set.
type Set[K comparable] struct {
	// Compare orders keys, for taking several at once.
	Compare func(a, b K) int

	mu   sync.Mutex
	held map[K]*lock
}

type lock struct {
	sync.Mutex
	refs int // holders and waiters; guarded by Set.mu
}

// Lock locks keys (duplicates allowed) and returns their release.
func (s *Set[K]) Lock(keys ...K) (unlock func()) {
	ks := slices.Clone(keys)
	if len(ks) > 1 {
		slices.SortFunc(ks, s.Compare)
		ks = slices.Compact(ks)
	}
	locks := make([]*lock, len(ks))
	s.mu.Lock()
	if s.held == nil {
		s.held = map[K]*lock{}
	}
	for i, k := range ks {
		l := s.held[k]
		if l == nil {
			l = &lock{}
			s.held[k] = l
		}
		l.refs++
		locks[i] = l
	}
	s.mu.Unlock()
	for _, l := range locks {
		l.Lock()
	}
	return func() {
		for _, l := range locks {
			l.Unlock()
		}
		s.mu.Lock()
		for i, l := range locks {
			if l.refs--; l.refs == 0 {
				delete(s.held, ks[i])
			}
		}
		s.mu.Unlock()
	}
}
