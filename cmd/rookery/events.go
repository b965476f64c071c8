package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/nats"
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

// embeddedOptions are the options of the embedded log (package local places it).
func (e *eventsConfig) embeddedOptions(log *slog.Logger) embedded.Options {
	return embedded.Options{Partitions: e.partitions, Logger: log, Retain: e.retain}
}

// open opens the configured event log when it is not in the embedded store's engine: the NATS
// log, or the embedded log in the data directory's events/ (with --store dynamo).
func (e *eventsConfig) open(ctx context.Context, dataDir string, log *slog.Logger) (events.Log, error) {
	switch e.backend {
	case "embedded":
		opts := e.embeddedOptions(log)
		opts.Dir = filepath.Join(dataDir, "events")
		return embedded.Open(opts)
	case "nats":
		return nats.Open(ctx, nats.Options{URL: e.natsURL, Prefix: e.natsPrefix, Partitions: e.partitions, LeaseTTL: e.leaseTTL, Logger: log})
	}
	return nil, fmt.Errorf("--events must be embedded or nats, not %q", e.backend)
}
