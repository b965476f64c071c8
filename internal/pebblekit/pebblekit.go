// Package pebblekit opens the Pebble engines Rookery embeds (the table store and the event log) the
// same way: a block cache, bloom filters on every level, the data directory or memory, and Pebble's
// errors in the service's log.
package pebblekit

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rookery/rookery"
)

// Config says where and how to open.
type Config struct {
	Name       string // what the database is, in log lines and errors ("the event log")
	Dir        string // the directory; ignored when InMemory
	InMemory   bool   // keep everything in memory (tests)
	FS         vfs.FS // if set, the file system Dir is in (tests: a crashable one); nil: the disk
	CacheBytes int64  // the block cache
	Logger     *slog.Logger
	// Tune, if set, adjusts the options before opening (memtable sizes, compression).
	Tune func(*cpebble.Options)
	// WALSyncInterval is the least time between two syncs of the write-ahead log on disk: 0 means
	// DefaultWALSyncInterval, a negative value syncs as soon as a commit asks.
	WALSyncInterval time.Duration
}

// Open opens the database c describes. Bloom filters let a lookup of a key that is not there (an
// insert's read, an append's de-duplication) skip sstables. Errors are *rookery.Error with op.
func Open(op rookery.Op, c Config) (*cpebble.DB, error) {
	if !c.InMemory && c.Dir == "" {
		return nil, rookery.E(op, rookery.Invalid, "a directory is required")
	}
	cache := cpebble.NewCache(c.CacheBytes)
	defer cache.Unref()
	po, dir := options(c, cache)
	db, err := cpebble.Open(dir, po)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || err != nil && strings.Contains(err.Error(), "lock held by current process") {
		// Pebble's LOCK file is held: flock answers "resource temporarily unavailable" (another
		// process), Pebble itself "lock held by current process".
		return nil, rookery.E(op, rookery.Conflict, "another process holds "+dir+" (is a rookery serve running on this --data-dir?)", err)
	}
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, "cannot open "+c.Name, err)
	}
	return db, nil
}

// options returns the engine options c asks for, and the directory to open.
func options(c Config, cache *cpebble.Cache) (*cpebble.Options, string) {
	po := &cpebble.Options{Cache: cache, Logger: engineLogger{log: c.Logger, name: c.Name}}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	separateLogValues(po)
	if c.Tune != nil {
		c.Tune(po)
	}
	dir := c.Dir
	switch {
	case c.InMemory:
		po.FS, dir = vfs.NewMem(), ""
	case c.FS != nil:
		po.FS = c.FS
	default:
		// On a disk a sync is a device flush, and every synced commit asks for one: a POST's, and
		// a consumer's that stages an event. Pebble syncs the write-ahead log for all the commits
		// waiting at once; spacing the syncs lets more commits share one, for a commit's wait of
		// at most this much more. In memory, or on a test's file system, a sync costs nothing.
		switch interval := c.WALSyncInterval; {
		case interval == 0:
			po.WALMinSyncInterval = func() time.Duration { return DefaultWALSyncInterval }
		case interval > 0:
			po.WALMinSyncInterval = func() time.Duration { return interval }
		}
	}
	return po, dir
}

// DefaultWALSyncInterval is the least time between two syncs of an engine's write-ahead log on
// disk unless configured: a fraction of a synced request's latency, and enough for a busy server's
// commits to share a sync. It spends the throughput of writers that each wait for their own sync
// to save a busy server's CPU (docs/performance.md, "Wave 1's benchmarks on today's code").
const DefaultWALSyncInterval = 250 * time.Microsecond

// separateLogValues has the values of the event log's stored events (LogEvents) written to blob
// files, which compactions pass by reference instead of rewriting; every other value stays in
// place. The events are written once, read back from memory while their consumers keep up, and
// kept for --event-retention (a day): in place, every compaction over them rewrote them, which
// was much of what compactions wrote (docs/performance.md). The table's items stay in place: a
// read of one would otherwise read a second file (blob files for every value cost more than they
// saved). It takes effect on an engine whose format has blob files (the store's: FormatNewest).
func separateLogValues(po *cpebble.Options) {
	po.Experimental.ValueSeparationPolicy = func() cpebble.ValueSeparationPolicy {
		// A compaction passes the references on however many blob files its inputs name (the
		// default depth made every compaction out of a deep level 0 write the values again):
		// events are read back from the sstables only by a consumer far behind. They are trimmed
		// oldest first, so a blob file's values mostly go together, and rewriting one to reclaim
		// its garbage is seldom worth it.
		return cpebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1, MaxBlobReferenceDepth: 1000,
			RewriteMinimumAge: 15 * time.Minute, TargetGarbageRatio: 0.5}
	}
	start, end := []byte{LogEvents}, []byte{LogEvents + 1}
	inPlace := cpebble.SpanPolicy{ValueStoragePolicy: cpebble.ValueStorageLowReadLatency}
	po.Experimental.SpanPolicyFunc = func(k []byte) (cpebble.SpanPolicy, []byte, error) {
		switch {
		case bytes.Compare(k, start) < 0:
			return inPlace, start, nil
		case bytes.Compare(k, end) < 0:
			return cpebble.SpanPolicy{}, end, nil
		}
		return inPlace, nil, nil
	}
}

// engineLogger passes Pebble's errors to slog and drops its informational chatter.
type engineLogger struct {
	log  *slog.Logger
	name string
}

func (engineLogger) Infof(string, ...any) {}
func (l engineLogger) Errorf(format string, args ...any) {
	l.log.Error(l.name + ": " + fmt.Sprintf(format, args...))
}
func (l engineLogger) Fatalf(format string, args ...any) {
	l.log.Error(l.name + ": fatal: " + fmt.Sprintf(format, args...))
	cpebble.DefaultLogger.Fatalf(format, args...)
}
