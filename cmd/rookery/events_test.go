package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events/eventstest"
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
