package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
	tlredis "github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/tablestore"
)

type timelinesConfig struct {
	backend            string
	redisAddr          string
	redisPrefix        string
	cap                int
	ttl                time.Duration
	inactiveAfter      time.Duration
	celebrityThreshold int
	markerCache        int
	headCache          int
	followerCache      int
	feedPages          int
}

func (c *timelinesConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.backend, "timelines", "store", "home timeline store: store (in the store: Pebble's own timeline layout with --store pebble, table items with --store dynamo), table (table items in either store) or redis")
	f.StringVar(&c.redisAddr, "redis-addr", "127.0.0.1:6379", "Redis address, with --timelines redis (host:port; several, comma-separated, for a cluster)")
	f.StringVar(&c.redisPrefix, "redis-prefix", "rookery", "prefix of Rookery's Redis keys")
	f.IntVar(&c.cap, "timeline-cap", timeline.DefaultCap, "entries kept per home timeline")
	f.DurationVar(&c.ttl, "timeline-ttl", 30*24*time.Hour, "home timeline entries expire this long after their post")
	f.DurationVar(&c.inactiveAfter, "inactive-after", 14*24*time.Hour, "readers who have not read their feed this long are skipped by fan-out; their timeline is rebuilt on their next read")
	f.IntVar(&c.markerCache, "timeline-marker-cache", pebblestore.DefaultMarkerCache, "with --timelines store on --store pebble: how many timelines' existence fan-out remembers in memory instead of reading it from the engine (negative: none)")
	f.IntVar(&c.headCache, "timeline-head-cache", pebblestore.DefaultHeadCache, "with --timelines store on --store pebble: how many timelines' newest entries are kept in memory, so that reading a feed's first page does not seek the engine (negative: none)")
	f.IntVar(&c.followerCache, "follower-cache", 1_000_000, "with --store pebble: how many follower ids (over all authors) fan-out keeps in memory instead of reading authors' follower lists from the store again, and as many ids of readers' follows, blocks and mutes, and as many of the posts they like, for the feed's reads (0: none)")
	f.IntVar(&c.feedPages, "feed-pages", app.DefaultFeedPages, "with --store pebble: how many feed pages are kept in memory, each served again until something it shows changes (0: none)")
	f.IntVar(&c.celebrityThreshold, "celebrity-threshold", app.DefaultCelebrityThreshold, "authors with more followers are merged at read time instead of fanned out")
}

// open returns the configured timeline store when it is not in the embedded store's engine, a
// readiness check for Redis (timelines in the store are covered by the store's check), and what
// closes it (before the store).
func (c *timelinesConfig) open(ctx context.Context, store table.Table, clock rookery.Clock, log *slog.Logger) (timeline.Store, func(context.Context) error, func() error, error) {
	nothing := func() error { return nil }
	switch c.backend {
	case "store", "table":
		s, err := tablestore.New(ctx, store, tablestore.Options{Limits: c.limits(), Clock: clock})
		return s, nil, nothing, err
	case "redis":
		client := goredis.NewUniversalClient(tlredis.ClientOptions(splitAddrs(c.redisAddr)))
		ping := func(ctx context.Context) error { return client.Ping(ctx).Err() }
		return tlredis.New(client, tlredis.Options{Prefix: c.redisPrefix, Limits: c.limits(), Clock: clock}), ping, client.Close, nil
	}
	return nil, nil, nil, fmt.Errorf("--timelines must be store, table or redis, not %q", c.backend)
}

func (c *timelinesConfig) limits() timeline.Limits {
	return timeline.Limits{Cap: c.cap, TTL: c.ttl, InactiveAfter: c.inactiveAfter}
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
