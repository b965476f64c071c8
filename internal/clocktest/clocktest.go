// Package clocktest is a clock that tests move by hand (rookery.Clock), for every conformance
// suite and scenario test that needs time to pass without waiting.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a rookery.Clock that stands still until Advance moves it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock set to t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now implements rookery.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
