package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestProbeDisk: the probe syncs for the time asked, orders its figures, and leaves no file.
func TestProbeDisk(t *testing.T) {
	dir := t.TempDir()
	r, err := ProbeDisk(context.Background(), dir, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Syncs == 0 || r.DurationS < 0.3 || r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs || r.Over50ms > r.Over20ms || r.Over20ms > r.Syncs {
		t.Fatalf("figures %+v", r)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %v", left)
	}
	if _, err := ProbeDisk(context.Background(), dir+"/missing", time.Millisecond, nil); err == nil {
		t.Fatal("a probe of a missing directory succeeded")
	}
}
