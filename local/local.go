// Package local opens the embedded backends of a data directory together: the table store, and,
// when asked for, the event log and the home timelines in the store's Pebble engine
// (internal/pebblekit says which key space each owns). It is the one place that wires them for
// crash safety, so that one synced write-ahead log covers them all:
//
//   - the log sits in the store's engine and takes the outbox's events out of the store's
//     transactions (it is the store's Stager): an event is in the log the moment its change
//     commits, and the outbox is Direct;
//   - the timelines are written unsynced, because the log's consumers, which write them, keep
//     their offsets in the same engine after the handler's writes (pebblestore.Options.Unsynced).
//
// A data directory whose events/ directory holds a log made by an earlier version keeps that log
// where it is; then nothing is staged and the outbox's relay moves the events, as with any other
// log.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline/pebblestore"
)

// Options say what to open in the data directory Dir.
type Options struct {
	Dir    string
	Logger *slog.Logger // nil means slog.Default()
	// Store configures the table store in Dir/store (its Dir is set here).
	Store pebble.Options
	// Log, if set, configures the embedded event log (its Dir and Engine are set here); nil when
	// the event log is elsewhere.
	Log *embedded.Options
	// Timelines, if set, configures the home timelines in the store's engine (Unsynced is set
	// here); nil when the timelines are elsewhere.
	Timelines *pebblestore.Options
}

// Backends are the open embedded backends. Close them with Close, not one by one.
type Backends struct {
	Store     *pebble.DB
	Log       *embedded.Log      // nil unless Options.Log was set
	Timelines *pebblestore.Store // nil unless Options.Timelines was set
	staged    bool
}

// Open opens the backends that o asks for, and wires them. Events an earlier run left in the
// outbox are moved to the log before the store stages new ones, so that they stay ahead of newer
// events of their key.
func Open(ctx context.Context, o Options) (*Backends, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	so := o.Store
	so.Dir = filepath.Join(o.Dir, "store")
	store, err := pebble.Open(so)
	if err != nil {
		return nil, err
	}
	b := &Backends{Store: store}
	if o.Log != nil {
		lo := *o.Log
		lo.Dir = filepath.Join(o.Dir, "events")
		if _, err := os.Stat(lo.Dir); errors.Is(err, fs.ErrNotExist) {
			lo.Engine = store.Engine()
		} else {
			o.Logger.Info("the event log stays in its own directory, as an earlier version made it", "dir", lo.Dir)
		}
		if b.Log, err = embedded.Open(lo); err != nil {
			b.Close()
			return nil, err
		}
		if lo.Engine != nil {
			ob := &events.Outbox{Table: store, Log: b.Log, Logger: o.Logger}
			if err := ob.Flush(ctx); err != nil {
				b.Close()
				return nil, fmt.Errorf("moving the outbox's events to the event log: %w", err)
			}
			store.SetStager(b.Log)
			b.staged = true
		}
	}
	if o.Timelines != nil {
		to := *o.Timelines
		to.Unsynced = b.staged
		b.Timelines = pebblestore.New(store.Engine(), to)
	}
	return b, nil
}

// Direct reports whether the store appends the outbox's events to the log itself
// (events.Outbox.Direct): true when the log is in the store's engine.
func (b *Backends) Direct() bool { return b.staged }

// Checkpoint writes a consistent copy of the data directory's engines to dir (which must not
// exist) while the backends run: store/ (with the log and the timelines when they share its engine)
// and, for a log in an engine of its own, events/. That log is copied first: a store copied after
// it may hold outbox items whose events the log's copy lacks (the relay appends them again on
// start) and consumer writes beyond the log's offsets (handled again), never the reverse.
func (b *Backends) Checkpoint(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if b.Log != nil && !b.staged {
		if err := b.Log.Checkpoint(filepath.Join(dir, "events")); err != nil {
			return err
		}
	}
	return b.Store.Checkpoint(ctx, filepath.Join(dir, "store"))
}

// Close closes the timelines, the log and the store, in that order (each of the first two writes
// into the store's engine).
func (b *Backends) Close() error {
	var errs []error
	if b.Timelines != nil {
		errs = append(errs, b.Timelines.Close())
	}
	if b.Log != nil {
		errs = append(errs, b.Log.Close())
	}
	errs = append(errs, b.Store.Close())
	return errors.Join(errs...)
}
