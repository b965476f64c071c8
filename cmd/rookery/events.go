package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/nats"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
)

type eventsConfig struct {
	backend    string
	natsURL    string
	natsPrefix string
	leaseTTL   time.Duration
	partitions int
	retain     time.Duration
}

func (e *eventsConfig) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.backend, "events", "embedded", "event log: embedded (in the data dir) or nats (JetStream)")
	f.StringVar(&e.natsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL, with --events nats")
	f.StringVar(&e.natsPrefix, "nats-prefix", "rookery", "prefix of the JetStream stream and subject names")
	f.DurationVar(&e.leaseTTL, "nats-lease-ttl", 5*time.Second, "with --events nats: how long a stopped process keeps its partitions of a consumer group before another process takes them over")
	f.IntVar(&e.partitions, "event-partitions", 16, "partitions of a new event log (fixed once created)")
	f.DurationVar(&e.retain, "event-retention", 24*time.Hour, "the embedded log deletes an event this long after it was appended, once every consumer has acked it (0: 24h; negative: keep every event)")
}

// open opens the configured event log. The embedded log lives in the engine of the embedded store,
// if there is one (store, with --store pebble), so that the outbox, the log and the consumers'
// writes share one write-ahead log; a data directory that already has a log of its own in events/
// (made by an earlier version) keeps using it. Close the log before the store.
func (e *eventsConfig) open(ctx context.Context, dataDir string, store *pebble.DB, log *slog.Logger) (events.Log, error) {
	switch e.backend {
	case "embedded":
		opts := embedded.Options{Dir: filepath.Join(dataDir, "events"), Partitions: e.partitions, Logger: log, Retain: e.retain}
		if store != nil {
			if _, err := os.Stat(opts.Dir); errors.Is(err, fs.ErrNotExist) {
				opts.Engine = store.Engine()
			} else {
				log.Info("the event log stays in its own directory, as an earlier version made it", "dir", opts.Dir)
			}
		}
		return embedded.Open(opts)
	case "nats":
		return nats.Open(ctx, nats.Options{URL: e.natsURL, Prefix: e.natsPrefix, Partitions: e.partitions, LeaseTTL: e.leaseTTL, Logger: log})
	}
	return nil, fmt.Errorf("--events must be embedded or nats, not %q", e.backend)
}

// onStore returns the event log if it is the embedded log in store's engine, else nil. Then the
// store appends the outbox's events to it in the transactions that write them (newOutbox), and
// timelines in that engine are written unsynced (timelinesConfig.open).
func onStore(evlog events.Log, store *pebble.DB) *embedded.Log {
	if l, ok := evlog.(*embedded.Log); ok && store != nil && l.SharesEngine(store.Engine()) {
		return l
	}
	return nil
}

// newOutbox returns the outbox of store and evlog: a direct one (no relay between them) when the
// log is on the store's engine, after moving what an earlier run left in the outbox to the log.
func newOutbox(ctx context.Context, store table.Table, embeddedStore *pebble.DB, evlog events.Log, clock rookery.Clock, log *slog.Logger) (*events.Outbox, error) {
	ob := &events.Outbox{Table: store, Log: evlog, Logger: log, Clock: clock}
	if l := onStore(evlog, embeddedStore); l != nil {
		if err := ob.Flush(ctx); err != nil {
			return nil, fmt.Errorf("moving the outbox's events to the event log: %w", err)
		}
		embeddedStore.SetStager(l)
		ob.Direct = true
	}
	return ob, nil
}
