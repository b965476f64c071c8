package pebblekit_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery/internal/pebblekit"
)

// TestLogValuesSeparated: the event log's stored events have their values in blob files from the
// first flush on, and every other key keeps its value in place.
func TestLogValuesSeparated(t *testing.T) {
	db, err := pebblekit.Open("test", pebblekit.Config{Name: "test", InMemory: true, CacheBytes: 8 << 20, Logger: slog.Default(),
		Tune: func(po *cpebble.Options) { po.FormatMajorVersion = cpebble.FormatNewest }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := bytes.Repeat([]byte("v"), 300)
	write := func(space byte) {
		t.Helper()
		b := db.NewBatch()
		for i := range 200 {
			if err := b.Set(fmt.Appendf([]byte{space}, "%05d", i), value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(cpebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, space := range []byte{pebblekit.TableItems, pebblekit.TimelineEntries, pebblekit.LogOffsets} {
		write(space)
	}
	if m := db.Metrics(); m.BlobFiles.LiveCount != 0 {
		t.Fatalf("%d blob files after writing the table's and the timelines' keys; want none", m.BlobFiles.LiveCount)
	}
	write(pebblekit.LogEvents)
	if m := db.Metrics(); m.BlobFiles.LiveCount == 0 || m.BlobFiles.ReferencedValueSize < 200*300 {
		t.Fatalf("after writing events: %d blob files holding %d bytes of values; want the events' 60,000", m.BlobFiles.LiveCount, m.BlobFiles.ReferencedValueSize)
	}
	for _, space := range []byte{pebblekit.TableItems, pebblekit.LogEvents} {
		got, closer, err := db.Get(fmt.Appendf([]byte{space}, "%05d", 7))
		if err != nil || !bytes.Equal(got, value) {
			t.Fatalf("space %q: read %q, %v", space, got, err)
		}
		closer.Close()
	}
}
