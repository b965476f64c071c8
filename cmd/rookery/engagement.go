package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/cache"
	cacheredis "github.com/rookery/rookery/cache/redis"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/export"
	tlredis "github.com/rookery/rookery/timeline/redis"
)

// engagementConfig holds the flags of activities, streaks, leaderboards and the analytics export.
type engagementConfig struct {
	points      string
	weights     string
	rateLimit   int
	ratePer     time.Duration
	cache       string
	shards      int
	boardCache  time.Duration
	postCache   time.Duration
	postCacheN  int
	exportDir   string
	exportRows  int
	exportBytes int64
	exportAge   time.Duration
}

func (c *engagementConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.points, "activity-points", "daily_open=10,post=5,comment=3,like=1", "activity types and their points (type=points,...); posts, comments and likes through the API count as post, comment and like")
	f.StringVar(&c.weights, "author-weights", "post=10,like=1", "score of the authors leaderboard: points per post made and per like received")
	f.IntVar(&c.rateLimit, "activity-rate-limit", 120, "activity writes a user may make per --activity-rate-window (429 beyond)")
	f.DurationVar(&c.ratePer, "activity-rate-window", time.Minute, "the window of --activity-rate-limit")
	f.StringVar(&c.cache, "cache", "memory", "where streak records are cached and rate limits counted: memory (this process) or redis (--redis-addr; shared by every process)")
	f.IntVar(&c.shards, "streak-shards", 16, "partitions of the streak leaderboard (fixed for the life of a table)")
	f.DurationVar(&c.postCache, "post-cache-ttl", app.DefaultPostCacheTTL, "how long copies of posts and of their authors' names are kept for the reads that show posts, coherent with every write, instead of being read from the table again: in process with the embedded store, in the --cache with --store dynamo (with --cache memory only in --role all) (0: never)")
	f.IntVar(&c.postCacheN, "post-cache-size", app.DefaultPostCacheSize, "with the embedded store, the most copies of posts, and of authors, kept in process for --post-cache-ttl (each post ~2.5 KB of the process's memory; fewer: more posts read from the store again)")
	f.DurationVar(&c.boardCache, "leaderboard-cache", 30*time.Second, "how long a leaderboard read is cached in process (0: not at all)")
	f.StringVar(&c.exportDir, "export-dir", "", "write every event to Parquet files under this directory, partitioned by date (off when empty; a relative path is under --data-dir), or to an S3 bucket: s3://bucket/prefix (the journal stays in <data-dir>/export-journal)")
	f.IntVar(&c.exportRows, "export-roll-rows", 100_000, "roll an export file at this many rows")
	f.Int64Var(&c.exportBytes, "export-roll-bytes", 64<<20, "roll an export file at this many bytes of payload")
	f.DurationVar(&c.exportAge, "export-roll-age", time.Minute, "roll an export file this long after its first row")
}

// parseWeights parses "name=n,name=n".
func parseWeights(flag, s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if !ok || err != nil || n < 0 || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--%s: %q is not name=points", flag, kv)
		}
		out[strings.TrimSpace(name)] = n
	}
	return out, nil
}

// engagement returns the App's engagement configuration; redisAddr and prefix serve --cache redis.
// With --cache memory in a process that shares the store with others (role api or worker), streak
// records are not cached at all: another process's writes would leave this one's copies stale.
func (c *engagementConfig) engagement(clock rookery.Clock, role, redisAddr, prefix string, log *slog.Logger) (app.Engagement, error) {
	points, err := parseWeights("activity-points", c.points)
	if err != nil {
		return app.Engagement{}, err
	}
	weights, err := parseWeights("author-weights", c.weights)
	if err != nil {
		return app.Engagement{}, err
	}
	for name := range weights {
		if name != "post" && name != "like" {
			return app.Engagement{}, fmt.Errorf("--author-weights: %q is not post or like", name)
		}
	}
	e := app.Engagement{Points: points, RateLimit: c.rateLimit, RatePer: c.ratePer, PostWeight: weights["post"],
		LikeWeight: weights["like"], StreakShards: c.shards, BoardCache: c.boardCache}
	switch c.cache {
	case "memory":
		if role != "all" {
			e.Cache = cache.Nop{}
			log.Info("--cache memory with --role " + role + ": streak records are read from the store, not cached; use --cache redis to share a cache")
		}
	case "redis":
		s := cacheredis.New(goredis.NewUniversalClient(tlredis.ClientOptions(splitAddrs(redisAddr))), prefix)
		e.Cache, e.Limiter = s, s
	default:
		return app.Engagement{}, fmt.Errorf("--cache must be memory or redis, not %q", c.cache)
	}
	return e, nil
}

// exporter opens the analytics export, if configured, and returns its consumer.
func (c *engagementConfig) exporter(ctx context.Context, cfg *config, log *slog.Logger) (*export.Exporter, []events.Consumer, error) {
	if c.exportDir == "" {
		return nil, nil, nil
	}
	o := export.Options{Dir: c.exportDir, MaxRows: c.exportRows, MaxBytes: c.exportBytes, MaxAge: c.exportAge, Logger: log}
	if strings.HasPrefix(c.exportDir, "s3://") {
		st, err := cfg.s3Store(ctx, c.exportDir)
		if err != nil {
			return nil, nil, fmt.Errorf("--export-dir: %w", err)
		}
		o.Dir, o.Store = "export-journal", st
	}
	if !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(cfg.dataDir, o.Dir)
	}
	e, err := export.Open(o)
	if err != nil {
		return nil, nil, fmt.Errorf("--export-dir: %w", err)
	}
	// Many events in flight, so that partitions do not wait on each other's journal syncs.
	return e, []events.Consumer{{Group: ExportGroup, Handle: e.Handle, Concurrency: 64, Background: true}}, nil
}

// ExportGroup is the consumer group of the analytics export.
const ExportGroup = "export"
