package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rookery/rookery/bench"
)

// serverFigures are the figures of a Rookery server's /metrics that the harness reads.
type serverFigures struct {
	cpuSeconds float64 // process_cpu_seconds_total
	rssBytes   float64 // process_resident_memory_bytes
	behind     float64 // the consumer groups' lag, summed (rookery_consumer_lag_events)
	written    float64 // the embedded engine's bytes written, every kind (rookery_engine_written_bytes_total)
	// syncs are the engine's log syncs that took at most each bound, in seconds (the cumulative
	// buckets of rookery_engine_wal_sync_seconds, +Inf's holding them all).
	syncs map[float64]float64
}

func (c *apiClient) serverFigures(ctx context.Context) (serverFigures, error) {
	body, err := c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return serverFigures{}, err
	}
	var f serverFigures
	for line := range strings.Lines(string(body)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		switch {
		case name == "process_cpu_seconds_total":
			f.cpuSeconds = n
		case name == "process_resident_memory_bytes":
			f.rssBytes = n
		case strings.HasPrefix(name, "rookery_consumer_lag_events{"):
			f.behind += n
		case strings.HasPrefix(name, "rookery_engine_written_bytes_total{"):
			f.written += n
		case strings.HasPrefix(name, `rookery_engine_wal_sync_seconds_bucket{le="`):
			le, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(name, `rookery_engine_wal_sync_seconds_bucket{le="`), `"}`), 64)
			if err == nil {
				if f.syncs == nil {
					f.syncs = map[float64]float64{}
				}
				f.syncs[le] = n
			}
		}
	}
	return f, nil
}

// serverMeter measures a Rookery server around each run from its /metrics (bench.Meter): its CPU
// from the run's start until its consumers caught up, its peak resident memory, and how long the
// consumers took to catch up after the load stopped.
type serverMeter struct {
	c    *apiClient
	wait time.Duration // the longest wait for the consumers to catch up
	out  io.Writer

	start   serverFigures
	stop    chan struct{}
	sampled sync.WaitGroup
	mu      sync.Mutex
	peak    float64
}

func (m *serverMeter) Start(ctx context.Context) error {
	f, err := m.c.serverFigures(ctx)
	if err != nil {
		return fmt.Errorf("reading the server's /metrics: %w", err)
	}
	m.start, m.peak, m.stop = f, f.rssBytes, make(chan struct{})
	m.sampled.Add(1)
	go func() {
		defer m.sampled.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			if f, err := m.c.serverFigures(ctx); err == nil {
				m.mu.Lock()
				m.peak = max(m.peak, f.rssBytes)
				m.mu.Unlock()
			}
		}
	}()
	return nil
}

func (m *serverMeter) Stop(ctx context.Context, r *bench.Result) {
	ended := time.Now()
	u := &bench.ServerUsage{CaughtUpS: -1}
	var last serverFigures
	for first := true; ; first = false {
		f, err := m.c.serverFigures(ctx)
		if err != nil {
			fmt.Fprintf(m.out, "bench: reading the server's /metrics: %v\n", err)
			break
		}
		last = f
		if first {
			u.BehindAtEnd = f.behind
		}
		waited := time.Since(ended)
		if f.behind == 0 {
			u.CaughtUpS = waited.Seconds()
			break
		}
		if waited > m.wait || ctx.Err() != nil {
			break
		}
		if !first && waited.Round(time.Second) != (waited-250*time.Millisecond).Round(time.Second) {
			fmt.Fprintf(m.out, "bench: the consumers are %.0f events behind, %s after the load\n", f.behind, waited.Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	close(m.stop)
	m.sampled.Wait()
	m.mu.Lock()
	u.PeakRSSMiB = max(m.peak, last.rssBytes) / (1 << 20)
	m.mu.Unlock()
	if last.cpuSeconds > 0 {
		u.CPUSeconds = last.cpuSeconds - m.start.cpuSeconds
		if r.Requests > 0 {
			u.CPUPerRequestMs = 1000 * u.CPUSeconds / float64(r.Requests)
			u.EngineKiBPerRequest = (last.written - m.start.written) / 1024 / float64(r.Requests)
		}
	}
	walSyncs(u, m.start.syncs, last.syncs)
	r.Server = u
}

// slowSync is the sync time walSyncs counts a sync slow above: the sweeps' bound on a p99.
const slowSync = 0.050

// walSyncs sets u's figures of the log syncs between the cumulative buckets before and after.
func walSyncs(u *bench.ServerUsage, before, after map[float64]float64) {
	bounds := slices.Sorted(maps.Keys(after))
	if len(bounds) == 0 {
		return
	}
	u.WALSyncs = after[math.Inf(1)] - before[math.Inf(1)]
	if u.WALSyncs <= 0 {
		return
	}
	for _, b := range bounds {
		within := after[b] - before[b]
		if b <= slowSync {
			u.WALSlowMs, u.WALSyncsSlow = 1000*b, u.WALSyncs-within
		}
		if within == u.WALSyncs && u.WALSyncMaxMs == 0 && !math.IsInf(b, 1) {
			u.WALSyncMaxMs = 1000 * b
		}
	}
}
