package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache/cachetest"
	"github.com/rookery/rookery/cache/redis"
	"github.com/rookery/rookery/internal/testenv"
)

// TestRedis runs the suite against the Redis of internal/testenv,
// each test under its own prefix.
func TestRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v (scripts/test.sh starts one)", addr, err)
	}
	cachetest.RunWallClockExpiry(t, func(t *testing.T, _ rookery.Clock) cachetest.Impl {
		s := redis.New(client, fmt.Sprintf("rookerytest-cache-%d", time.Now().UnixNano()))
		t.Cleanup(func() { s.Drop(context.Background()) })
		return s
	})
}
