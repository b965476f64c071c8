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
	return s.getSince(time.Time{}, now, ttl, 0, read)
}

// getSince is get of a value read at since or later. A value read before since is read again, but
// no sooner than spacing after the read before (the caller waits, and so do the others, who then
// share the new read): the reads stay bounded however many callers ask for a newer value.
func (s *snapshot[T]) getSince(since, now time.Time, ttl, spacing time.Duration, read func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && now.Sub(s.at) < ttl {
		if !s.at.Before(since) {
			return s.v, nil
		}
		if wait := spacing - now.Sub(s.at); wait > 0 {
			time.Sleep(wait)
			now = now.Add(wait)
		}
	}
	v, err := read()
	if err != nil {
		var zero T
		return zero, err
	}
	s.v, s.at = v, now // now was taken before the read: the value holds what was written by then
	return v, nil
}

// forget makes the next get read the value again.
func (s *snapshot[T]) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = time.Time{}
}
