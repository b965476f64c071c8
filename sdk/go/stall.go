package rookery

import (
	"io"
	"sync/atomic"
	"time"
)

// stallTimer cancels a request when one wait for its server passes d (never if d is 0): it runs
// only from start to stop, around each wait.
type stallTimer struct {
	d      time.Duration
	cancel func()
	t      *time.Timer
	fired  atomic.Bool
}

func newStallTimer(d time.Duration, cancel func()) *stallTimer {
	return &stallTimer{d: d, cancel: cancel}
}

func (s *stallTimer) start() {
	switch {
	case s.d <= 0:
	case s.t == nil:
		s.t = time.AfterFunc(s.d, func() { s.fired.Store(true); s.cancel() })
	default:
		s.t.Reset(s.d)
	}
}

func (s *stallTimer) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}

// stallReader reads r, each read bounded by wait.
type stallReader struct {
	r    io.Reader
	wait *stallTimer
}

func (s stallReader) Read(p []byte) (int, error) {
	s.wait.start()
	defer s.wait.stop()
	return s.r.Read(p)
}
