package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
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
