package bench

import (
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// A feed.post event's lag is from its post's 201, whichever of the two the harness sees first.
func TestStreamLagEitherOrder(t *testing.T) {
	s := &Streams{posted: map[string]time.Time{}, early: map[string][]time.Time{},
		hist: hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)}
	t0 := time.Now()
	s.Posted("p1", t0)
	s.arrived("p1", t0.Add(30*time.Millisecond))
	s.arrived("p2", t0.Add(10*time.Millisecond)) // before its 201
	s.Posted("p2", t0.Add(20*time.Millisecond))
	r := s.Result()
	if r.Count != 2 || r.Max < 29 || r.Max > 31 || r.P50 > 0.01 {
		t.Fatalf("lags %+v; want 30 ms and ~0", r)
	}
	if id := postIDOf(`{"post":{"id":"01ABC","author":{}},"position":"x"}`); id != "01ABC" {
		t.Fatalf("postIDOf = %q", id)
	}
}
