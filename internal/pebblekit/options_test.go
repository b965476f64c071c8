package pebblekit

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSyncsSpacedOnDisk: an engine on disk spaces its write-ahead log's syncs so that commits share
// them; one in memory or on a test's file system, where a sync costs nothing, does not.
func TestSyncsSpacedOnDisk(t *testing.T) {
	po, dir := options(Config{Name: "test", Dir: "/data/store"}, nil)
	if dir != "/data/store" || po.WALMinSyncInterval == nil || po.WALMinSyncInterval() != DefaultWALSyncInterval {
		t.Fatalf("on disk: dir %q, syncs spaced %v; want /data/store, spaced by %v", dir, po.WALMinSyncInterval != nil, DefaultWALSyncInterval)
	}
	if po, _ := options(Config{Name: "test", Dir: "/data/store", WALSyncInterval: time.Millisecond}, nil); po.WALMinSyncInterval == nil || po.WALMinSyncInterval() != time.Millisecond {
		t.Errorf("configured 1ms: syncs spaced %v; want by 1ms", po.WALMinSyncInterval != nil)
	}
	if po, _ := options(Config{Name: "test", Dir: "/data/store", WALSyncInterval: -1}, nil); po.WALMinSyncInterval != nil {
		t.Errorf("configured not to space syncs: spaced by %v", po.WALMinSyncInterval())
	}
	for name, c := range map[string]Config{
		"in memory":   {Name: "test", InMemory: true},
		"a test's fs": {Name: "test", Dir: "store", FS: vfs.NewMem()},
	} {
		if po, _ := options(c, nil); po.WALMinSyncInterval != nil {
			t.Errorf("%s: syncs spaced by %v; want not spaced", name, po.WALMinSyncInterval())
		}
	}
}
