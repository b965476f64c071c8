package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/local"
	"github.com/rookery/rookery/metrics"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
)

// backends are what serve runs on: the store, the event log and the home timelines, as the flags
// configure them. The embedded ones (with --store pebble) come from package local, wired there.
type backends struct {
	store     table.Table // observed by the metrics
	log       events.Log
	timelines timeline.Store
	// direct says the store appends the outbox's events to the log itself (events.Outbox.Direct).
	direct bool
	// streamTable is where the consumers append to the stream logs (app.Deps.StreamTable): the
	// store's unsynced writes when the log's offsets are in the store's engine, else the store.
	streamTable table.Table
	// ready holds the readiness checks of backends the store's check does not cover.
	ready map[string]func(context.Context) error
	// closers close what was opened, in order: timelines and log before the store.
	closers []func() error
	// local are the embedded backends, if the store is embedded (backups copy them).
	local *local.Backends
}

// backup returns the HTTP server's Backup, if there is an embedded store to back up.
func (b *backends) backup(c backupConfig, cfg *config) httpapi.Backup {
	if b.local == nil {
		return nil
	}
	return c.backup(cfg, b.local.Checkpoint)
}

func openBackends(ctx context.Context, cfg *config, sc serveConfig, clock rookery.Clock, cursorKey []byte, m *metrics.Metrics, log *slog.Logger) (_ *backends, err error) {
	b := &backends{ready: map[string]func(context.Context) error{}}
	defer func() {
		if err != nil { // close what opened before the failure
			b.close(log)
		}
	}()
	var lb *local.Backends
	if cfg.store == "pebble" {
		o, err := cfg.localOptions(clock, cursorKey, log)
		if err != nil {
			return nil, err
		}
		if sc.events.backend == "embedded" {
			lo := sc.events.embeddedOptions(log)
			o.Log = &lo
		}
		if sc.timelines.backend == "store" {
			to := sc.timelines.pebbleOptions(clock, log)
			o.Timelines = &to
		}
		if lb, err = local.Open(ctx, o); err != nil {
			return nil, err
		}
		b.store, b.direct, b.local = lb.Store, lb.Direct(), lb
		m.WatchEngine(func() metrics.EngineStats { return metrics.EngineStats(lb.Store.EngineStats()) })
		if b.direct {
			b.streamTable = table.Observed(lb.Store.Unsynced(), m.ObserveStore)
		}
		b.closers = append(b.closers, lb.Close)
	} else {
		if b.store, err = cfg.openDynamo(ctx, clock, cursorKey, m); err != nil {
			return nil, err
		}
		b.closers = append(b.closers, b.store.Close)
	}
	b.store = table.Observed(b.store, m.ObserveStore)
	b.ready["store"] = b.store.Ping

	if lb != nil && lb.Log != nil {
		b.log = lb.Log
	} else {
		if b.log, err = sc.events.open(ctx, cfg, log); err != nil {
			return nil, err
		}
		b.closers = append([]func() error{b.log.Close}, b.closers...)
	}
	b.ready["events"] = b.log.Ping

	if lb != nil && lb.Timelines != nil {
		b.timelines = lb.Timelines
	} else {
		tl, ready, closeTimelines, err := sc.timelines.open(ctx, b.store, clock, log)
		if err != nil {
			return nil, err
		}
		b.timelines = tl
		if ready != nil {
			b.ready["timelines"] = ready
		}
		b.closers = append([]func() error{closeTimelines}, b.closers...)
	}
	return b, nil
}

// outbox returns the outbox of the store and the log.
func (b *backends) outbox(clock rookery.Clock, log *slog.Logger) *events.Outbox {
	return &events.Outbox{Table: b.store, Log: b.log, Logger: log, Clock: clock, Direct: b.direct}
}

func (b *backends) close(log *slog.Logger) {
	for _, c := range b.closers {
		if err := c(); err != nil {
			log.Error("closing the backends", "err", err)
		}
	}
}

// localOptions are the options of the embedded store in the data directory.
func (c *config) localOptions(clock rookery.Clock, cursorKey []byte, log *slog.Logger) (local.Options, error) {
	if c.blockCache < 8 {
		return local.Options{}, fmt.Errorf("--block-cache-mib must be at least 8, not %d", c.blockCache)
	}
	if c.walSync < 0 {
		return local.Options{}, fmt.Errorf("--wal-sync-interval must not be negative, not %v", c.walSync)
	}
	walSync := c.walSync
	if walSync == 0 {
		walSync = -1 // the store's Options read 0 as the default
	}
	return local.Options{Dir: c.dataDir, Logger: log, Store: pebble.Options{
		Schema: app.Schema, Clock: clock, CursorKey: cursorKey, Logger: log, CacheBytes: int64(c.blockCache) << 20,
		WALSyncInterval: walSync,
	}}, nil
}

func (c *timelinesConfig) pebbleOptions(clock rookery.Clock, log *slog.Logger) pebblestore.Options {
	return pebblestore.Options{Limits: c.limits(), Clock: clock, Logger: log, MarkerCache: c.markerCache, HeadCache: c.headCache}
}
