package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
)

// The embedded log goes into the store's engine, unless the data directory already has a log of
// its own (made by an earlier version), which keeps its events.
func TestEmbeddedLogPlace(t *testing.T) {
	ctx := context.Background()
	e := &eventsConfig{backend: "embedded", partitions: 4}
	for _, legacy := range []bool{false, true} {
		dataDir := t.TempDir()
		store, err := pebble.Open(pebble.Options{Dir: filepath.Join(dataDir, "store"), Clock: rookery.SystemClock, CursorKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		if legacy {
			if err := os.Mkdir(filepath.Join(dataDir, "events"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		l, err := e.open(ctx, dataDir, store, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(ctx, []rookery.Event{eventstest.Event("e1", "k", 0)}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		files, _ := os.ReadDir(filepath.Join(dataDir, "events"))
		if legacy && len(files) == 0 {
			t.Error("an existing events/ directory was not used")
		}
		if !legacy && files != nil {
			t.Errorf("the log made events/ (%d files) instead of using the store's engine", len(files))
		}
		// The store is still open after the log's Close, and holds the log when shared.
		_, closer, err := store.Engine().Get([]byte("mpartitions"))
		if legacy != (err != nil) {
			t.Errorf("legacy=%v: the log's partition count in the store's engine: err %v", legacy, err)
		}
		if err == nil {
			closer.Close()
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// newOutbox makes the outbox direct when the embedded log is in the store's engine, after moving
// what an earlier run left in the outbox to the log; otherwise the relay does the moving.
func TestNewOutbox(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	e := &eventsConfig{backend: "embedded", partitions: 4}
	for _, onStore := range []bool{true, false} {
		dataDir := t.TempDir()
		store, err := pebble.Open(pebble.Options{Dir: filepath.Join(dataDir, "store"), Clock: rookery.SystemClock, CursorKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		if !onStore {
			if err := os.Mkdir(filepath.Join(dataDir, "events"), 0o755); err != nil { // a log of its own
				t.Fatal(err)
			}
		}
		l, err := e.open(ctx, dataDir, store, log)
		if err != nil {
			t.Fatal(err)
		}
		// An earlier run's event, left in the outbox.
		left, _ := (&events.Outbox{Table: store, Log: l}).Write(eventstest.Event("e1", "k", 0))
		if err := store.TransactWrite(ctx, []table.Write{left}); err != nil {
			t.Fatal(err)
		}
		ob, err := newOutbox(ctx, store, store, l, rookery.SystemClock, log)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := ob.Write(eventstest.Event("e2", "k", 1))
		if err := store.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
		pending, _ := ob.Pending(ctx, 10)
		inLog, _, _ := l.Lag(ctx, "g")
		if onStore && (!ob.Direct || pending != 0 || inLog != 2) {
			t.Fatalf("on the store's engine: direct %v, %d left in the outbox, %d in the log; want direct, 0, 2", ob.Direct, pending, inLog)
		}
		if !onStore && (ob.Direct || pending != 2 || inLog != 0) {
			t.Fatalf("a log of its own: direct %v, %d in the outbox, %d in the log; want the relay's: 2, 0", ob.Direct, pending, inLog)
		}
		l.Close()
		store.Close()
	}
}
