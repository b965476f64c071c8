package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/internal/pebblekit"
)

// blocking is a component that runs until stopped and counts its stops.
func blocking(stops *atomic.Int32) component {
	done := make(chan struct{})
	return component{name: "blocking", run: func() error { <-done; return nil }, stop: func(error) { stops.Add(1); close(done) }}
}

// TestRunComponents: all parts stop together, when the context ends (nil) or when one part fails
// (its error); every part is stopped once and returns before runComponents does.
func TestRunComponents(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var stops atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runComponents(ctx, log, blocking(&stops), blocking(&stops)) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; err != nil || stops.Load() != 2 {
		t.Fatalf("after the context ended: %v, %d stops; want nil, 2", err, stops.Load())
	}

	stops.Store(0)
	boom := errors.New("listener closed")
	failing := component{name: "failing", run: func() error { return boom }, stop: func(error) {}}
	if err := runComponents(context.Background(), log, blocking(&stops), failing); !errors.Is(err, boom) || stops.Load() != 1 {
		t.Fatalf("after a part failed: %v, %d stops; want %v, 1", err, stops.Load(), boom)
	}

	// A part that stops on its own (a consumer whose work ended) does not stop the others.
	var ran atomic.Bool
	quiet := untilStopped("quiet", log, func(context.Context) error { ran.Store(true); return errors.New("gone") })
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stops.Store(0)
	if err := runComponents(ctx, log, blocking(&stops), quiet); err != nil || !ran.Load() || stops.Load() != 1 {
		t.Fatalf("with a part whose work ended: %v, ran %v, %d stops", err, ran.Load(), stops.Load())
	}
}

// TestBackgroundYield: the background consumers yield by default only where an event's path is all
// in process (the embedded log and the polling relay); given on the command line or in the
// environment, the setting holds on every deployment.
func TestBackgroundYield(t *testing.T) {
	for _, c := range []struct {
		store string
		args  []string
		env   string
		want  time.Duration
	}{
		{"pebble", nil, "", 100 * time.Millisecond},
		{"pebble", []string{"--background-yield", "0"}, "", 0},
		{"dynamo", nil, "", 0}, // the DynamoDB stream relay
		{"dynamo", []string{"--relay", "poll"}, "", 100 * time.Millisecond},
		{"pebble", []string{"--events", "nats"}, "", 0},
		{"pebble", []string{"--events", "sqs", "--background-yield", "2s"}, "", 2 * time.Second},
		{"dynamo", []string{"--events", "nats"}, "1s", time.Second},
	} {
		var e eventsConfig
		cmd := &cobra.Command{Use: "serve"}
		e.addFlags(cmd)
		if err := cmd.Flags().Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := bindEnv(cmd.Flags(), func(name string) string {
			if name == "ROOKERY_BACKGROUND_YIELD" {
				return c.env
			}
			return ""
		}); err != nil {
			t.Fatal(err)
		}
		e.yieldSet = cmd.Flags().Changed("background-yield")
		if got := e.backgroundYield(&config{store: c.store}); got != c.want {
			t.Errorf("--store %s %v, ROOKERY_BACKGROUND_YIELD=%q: %v; want %v", c.store, c.args, c.env, got, c.want)
		}
	}
}

// TestProcs: --procs wins when set; else a GOMAXPROCS from the environment is kept, and without one
// the server runs twice Go's default, counted from the start (serve may run again in a process).
func TestProcs(t *testing.T) {
	for _, c := range []struct {
		n       int
		fromEnv bool
		want    int
	}{{3, false, 3}, {3, true, 3}, {0, true, startProcs}, {0, false, 2 * startProcs}, {-1, false, 2 * startProcs}} {
		if got := procs(c.n, c.fromEnv); got != c.want {
			t.Errorf("procs(%d, %v) = %d, want %d", c.n, c.fromEnv, got, c.want)
		}
	}
}

// TestWALSyncInterval: --wal-sync-interval reaches the store's options, 0 as syncing as soon as a
// commit asks (which the options spell negative, their 0 being the default), and a negative one
// is refused.
func TestWALSyncInterval(t *testing.T) {
	for flag, want := range map[time.Duration]time.Duration{pebblekit.DefaultWALSyncInterval: pebblekit.DefaultWALSyncInterval, time.Millisecond: time.Millisecond, 0: -1} {
		c := config{blockCache: 128, walSync: flag}
		o, err := c.localOptions(nil, nil, nil)
		if err != nil || o.Store.WALSyncInterval != want {
			t.Errorf("--wal-sync-interval %v: the store's interval %v (%v); want %v", flag, o.Store.WALSyncInterval, err, want)
		}
	}
	c := config{blockCache: 128, walSync: -time.Millisecond}
	if _, err := c.localOptions(nil, nil, nil); err == nil || !strings.Contains(err.Error(), "--wal-sync-interval") {
		t.Fatalf("a negative --wal-sync-interval: %v", err)
	}
}
