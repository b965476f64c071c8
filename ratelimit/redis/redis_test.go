package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/ratelimit/ratelimittest"
	"github.com/rookery/rookery/ratelimit/redis"
)

// TestRedis runs the suite against the Redis of internal/testenv, under a prefix of its own, and
// deletes its keys after.
func TestRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s: %v (scripts/test.sh starts one)", addr, err)
	}
	l := redis.New(client, fmt.Sprintf("rookerytest-rl-%d", time.Now().UnixNano()))
	t.Cleanup(func() {
		if err := l.Drop(ctx, client); err != nil {
			t.Error(err)
		}
	})
	ratelimittest.Run(t, l, "t:")
}
