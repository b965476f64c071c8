// Package rookery holds the domain of the Rookery feed backend: its error type, the clock and id
// sources that everything below cmd receives instead of reaching for time.Now, and (as the social
// model grows) the domain types and the interfaces the rest of the system depends on.
//
// Imports point inward: cmd -> httpapi, workers -> app -> rookery; backends import rookery and their
// engine only; only cmd imports backends (enforced by lint_test.go).
package rookery

import (
	"context"
	"time"
)

// Clock tells the time. Code below cmd takes a Clock instead of calling time.Now, so that tests
// can control time (TTL expiry, streak days, token expiry).
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock: ClockFunc(time.Now) is the system clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock. Only cmd and tests should name it.
var SystemClock Clock = ClockFunc(time.Now)

// Sleep waits for d or until ctx ends; it reports whether the whole d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
