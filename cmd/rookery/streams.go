package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery/live/redisbus"
	tlredis "github.com/rookery/rookery/timeline/redis"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/live"
	"github.com/rookery/rookery/live/natsbus"
)

type streamsConfig struct {
	on        bool
	bus       string
	heartbeat time.Duration
	buffer    int
}

func (c *streamsConfig) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.on, "streams", true, "serve live streams (GET /v1/stream); the workers then keep the stream logs of users with a stream open in the last 24 hours")
	f.StringVar(&c.bus, "stream-bus", "", "how stream events reach the API processes: local (one process), nats (the --nats-url server) or redis (the --redis-addr server, pub/sub); empty: nats with --events nats, redis with --events sqs, else local")
	f.DurationVar(&c.heartbeat, "stream-heartbeat", 15*time.Second, "how often an idle stream gets a heartbeat (and checks for events the bus lost)")
	f.IntVar(&c.buffer, "stream-buffer", 128, "events a stream may fall behind before it is dropped (its client resumes from its last event)")
}

// open returns the streams' options for the HTTP server, the publisher for the App (nil with
// --streams=false), and what closes the bus.
func (c *streamsConfig) open(events eventsConfig, tl timelinesConfig, log *slog.Logger) (httpapi.StreamOptions, app.StreamPublisher, func() error, error) {
	nothing := func() error { return nil }
	if !c.on {
		return httpapi.StreamOptions{}, nil, nothing, nil
	}
	hub := &live.Hub{}
	opts := httpapi.StreamOptions{Hub: hub, Heartbeat: c.heartbeat, Buffer: c.buffer}
	bus := c.bus
	if bus == "" {
		bus = "local"
		switch events.backend {
		case "nats":
			bus = "nats"
		case "sqs":
			bus = "redis"
		}
	}
	switch bus {
	case "local":
		return opts, live.Local{Hub: hub}, nothing, nil
	case "nats":
		b, err := natsbus.Open(natsbus.Options{URL: events.natsURL, Prefix: events.natsPrefix, Logger: log}, hub)
		if err != nil {
			return httpapi.StreamOptions{}, nil, nil, fmt.Errorf("--stream-bus nats: %w", err)
		}
		return opts, b, b.Close, nil
	case "redis":
		client := goredis.NewUniversalClient(tlredis.ClientOptions(splitAddrs(tl.redisAddr)))
		b := redisbus.Open(client, redisbus.Options{Prefix: tl.redisPrefix, Logger: log}, hub)
		return opts, b, func() error { return errors.Join(b.Close(), client.Close()) }, nil
	}
	return httpapi.StreamOptions{}, nil, nil, fmt.Errorf("--stream-bus must be local, nats or redis, not %q", c.bus)
}

// presenceDelay is how long a user's first stream waits to begin: with a shared event log other
// processes' consumers append to the stream logs, and they learn of a new one within
// app.PresenceRefresh.
func (c *streamsConfig) presenceDelay(events eventsConfig) time.Duration {
	if events.backend == "nats" || events.backend == "sqs" {
		return app.PresenceRefresh + 200*time.Millisecond
	}
	return 0
}
