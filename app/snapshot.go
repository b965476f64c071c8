package app

import (
	"sync"
	"time"
)

// snapshot is a value a process read at most ttl ago, shared by its callers: a registry every
// request or event consults (the celebrities, the webhook endpoints) costs one read per ttl.
type snapshot[T any] struct {
	mu sync.Mutex
	v  T
	at time.Time
}

// get returns the value, reading it again with read if it is older than ttl at now.
func (s *snapshot[T]) get(now time.Time, ttl time.Duration, read func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && now.Sub(s.at) < ttl {
		return s.v, nil
	}
	v, err := read()
	if err != nil {
		var zero T
		return zero, err
	}
	s.v, s.at = v, now
	return v, nil
}

// forget makes the next get read the value again.
func (s *snapshot[T]) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = time.Time{}
}
