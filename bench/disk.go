package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rookery/rookery/internal/progress"
)

// DiskSyncs is what a disk's syncs cost: how a commit that waits for its write-ahead log to be on
// disk fares there, whatever the server does.
type DiskSyncs struct {
	Syncs          int     `json:"syncs"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	MaxMs          float64 `json:"max_ms"`
	Over20ms       int     `json:"over_20ms"`
	Over50ms       int     `json:"over_50ms"`
	DurationS      float64 `json:"duration_s"`
	SyncsPerSecond float64 `json:"syncs_per_s"`
}

// diskProbeSpan is how much of its file the probe writes before it starts over at the front: a
// write-ahead log's files are reused the same way, so a sync needs no new blocks.
const diskProbeSpan = 64 << 20

// ProbeDisk appends 4 KiB to a file in dir and syncs it, again and again for d, and reports how
// long the syncs took; the file is removed after. Progress goes to w (nil: none).
func ProbeDisk(ctx context.Context, dir string, d time.Duration, w io.Writer) (DiskSyncs, error) {
	f, err := os.CreateTemp(dir, "rookery-disk-probe-*")
	if err != nil {
		return DiskSyncs{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	bar := progress.New(w, "disk syncs in "+filepath.Dir(f.Name()), int64(d.Seconds()), "s")
	block := make([]byte, 4096)
	var took []time.Duration
	start := time.Now()
	for off := int64(0); time.Since(start) < d && ctx.Err() == nil; off = (off + int64(len(block))) % diskProbeSpan {
		if _, err := f.WriteAt(block, off); err != nil {
			return DiskSyncs{}, err
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return DiskSyncs{}, err
		}
		took = append(took, time.Since(t))
		bar.Set(int64(time.Since(start).Seconds()))
	}
	bar.Finish()
	if len(took) == 0 {
		return DiskSyncs{}, ctx.Err()
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r := DiskSyncs{Syncs: len(took), P50Ms: ms(took[len(took)/2]), P99Ms: ms(took[len(took)*99/100]), MaxMs: ms(took[len(took)-1]),
		DurationS: time.Since(start).Seconds()}
	r.SyncsPerSecond = float64(r.Syncs) / r.DurationS
	for _, t := range took {
		if t > 20*time.Millisecond {
			r.Over20ms++
		}
		if t > 50*time.Millisecond {
			r.Over50ms++
		}
	}
	return r, nil
}

// String is the probe's one line.
func (r DiskSyncs) String() string {
	return fmt.Sprintf("%d syncs of 4 KiB writes in %.0f s: p50 %.2f ms, p99 %.2f ms, max %.0f ms; %d over 20 ms, %d over 50 ms",
		r.Syncs, r.DurationS, r.P50Ms, r.P99Ms, r.MaxMs, r.Over20ms, r.Over50ms)
}
