package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
)

// baselines say where the baselines of `rookery bench` and `rookery bench front` live.
type baselines struct {
	pgURL, redisAddr, name string
}

func (b *baselines) addFlags(f *pflag.FlagSet, name, nameHelp string) {
	f.StringVar(&b.pgURL, "postgres-url", "postgres://postgres@127.0.0.1:5432/test", "the PostgreSQL of --target postgres")
	f.StringVar(&b.redisAddr, "baseline-redis-addr", "127.0.0.1:6379", "the Redis of --target redis-list")
	f.StringVar(&b.name, "baseline-name", name, nameHelp)
}

// open loads g into the baseline kind (postgres or redis-list), reading posts whole if hydrated,
// and returns it with what drops it. ok is false if kind names no baseline.
func (b *baselines) open(ctx context.Context, kind string, g graph.Graph, hydrated bool, progress io.Writer) (t bench.Target, drop func(), ok bool, err error) {
	switch kind {
	case "postgres":
		pt, err := bench.NewPostgresTarget(ctx, b.pgURL, b.name, 64)
		if err != nil {
			return nil, nil, true, err
		}
		drop = func() { pt.Drop(context.Background()) }
		pt.Hydrated, t = hydrated, pt
		if err := pt.Load(ctx, g, progress); err != nil {
			drop()
			return nil, nil, true, err
		}
	case "redis-list":
		rt := bench.NewRedisListTarget(b.redisAddr, b.name)
		drop = func() { rt.Drop(context.Background()); rt.Close() }
		rt.Hydrated, t = hydrated, rt
		if err := rt.Load(ctx, g, progress); err != nil {
			drop()
			return nil, nil, true, fmt.Errorf("loading the redis-list baseline: %w", err)
		}
	default:
		return nil, nil, false, nil
	}
	return t, drop, true, nil
}
