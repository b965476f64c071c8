package redis_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/timelinetest"
)

// The tests use the Redis on 127.0.0.1:6379 (or ROOKERY_TEST_REDIS_ADDR), each with a key prefix of
// its own, deleted when it ends. A Redis that does not answer fails them: they never skip.
func addr() string {
	if a := os.Getenv("ROOKERY_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

var seq atomic.Int64

func TestConformance(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: addr()})
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", addr(), err)
	}
	timelinetest.Run(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		prefix := fmt.Sprintf("rookerytest-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
		t.Cleanup(func() {
			ctx := context.Background()
			iter := client.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				client.Del(ctx, iter.Val())
			}
		})
		return redis.New(client, redis.Options{Prefix: prefix, Cap: cfg.Cap, InactiveAfter: cfg.InactiveAfter})
	})
}
