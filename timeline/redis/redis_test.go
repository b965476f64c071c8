package redis_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/timelinetest"
)

// The tests use the Redis of internal/testenv, each with a key prefix of
// its own, deleted when it ends. A Redis that does not answer fails them: they never skip.
func addr() string { return testenv.RedisAddr() }

var seq atomic.Int64

func TestConformance(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: addr()})
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", addr(), err)
	}
	timelinetest.RunWallClockExpiry(t, func(t testing.TB, cfg timelinetest.Config) timeline.Store {
		prefix := fmt.Sprintf("rookerytest-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
		s := redis.New(client, redis.Options{Prefix: prefix, Limits: cfg.Limits, Clock: cfg.Clock})
		t.Cleanup(func() { s.Drop(context.Background()) })
		return s
	})
}

// TestDrop: Drop removes every key of the store's prefix, and only those.
func TestDrop(t *testing.T) {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: addr()})
	t.Cleanup(func() { client.Close() })
	prefix := fmt.Sprintf("rookerytest-drop-%d-%d", os.Getpid(), seq.Add(1))
	s, other := redis.New(client, redis.Options{Prefix: prefix}), redis.New(client, redis.Options{Prefix: prefix + "x"})
	t.Cleanup(func() { other.Drop(ctx) })
	for _, st := range []*redis.Store{s, other} {
		if err := st.Create(ctx, "u", []timeline.Entry{{PostID: "p1", AuthorID: "a", At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Keys(ctx, "{"+prefix+":*").Val()); n != 0 {
		t.Fatalf("%d keys left after Drop", n)
	}
	if ok, _ := other.Exists(ctx, "u"); !ok {
		t.Fatal("Drop removed another prefix's timeline")
	}
}

// TestPushAfterScriptFlush: Push calls its scripts by hash; when Redis has lost them (a restart,
// SCRIPT FLUSH), it loads them and pushes all the same.
func TestPushAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: addr()})
	t.Cleanup(func() { client.Close() })
	prefix := fmt.Sprintf("rookerytest-flush-%d-%d", os.Getpid(), seq.Add(1))
	s := redis.New(client, redis.Options{Prefix: prefix})
	t.Cleanup(func() { s.Drop(ctx) })
	for _, u := range []string{"a", "b"} {
		if err := s.Create(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	for i, post := range []string{"p1", "p2"} {
		// Other tests' scripts are called through go-redis's Run, which falls back to EVAL.
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Push(ctx, []string{"a", "b"}, timeline.Entry{PostID: post, AuthorID: "x", At: at.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatalf("push after SCRIPT FLUSH: %v", err)
		}
	}
	for _, u := range []string{"a", "b"} {
		p, err := s.Page(ctx, u, timeline.Entry{}, 10)
		if err != nil || len(p.Entries) != 2 {
			t.Fatalf("%s's timeline after pushes = %+v, %v", u, p, err)
		}
	}
}

// TestPushHoldsTheCapExactly: pushes trim a timeline to exactly its cap (the sentinel aside) once it
// is full, and leave one below the cap untouched.
func TestPushHoldsTheCapExactly(t *testing.T) {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: addr()})
	t.Cleanup(func() { client.Close() })
	prefix := fmt.Sprintf("rookerytest-cap-%d-%d", os.Getpid(), seq.Add(1))
	const cap = 5
	s := redis.New(client, redis.Options{Prefix: prefix, Limits: timeline.Limits{Cap: cap, InactiveAfter: time.Hour}})
	t.Cleanup(func() { s.Drop(ctx) })
	if err := s.Create(ctx, "u", nil); err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	for n := range cap + 3 {
		e := timeline.Entry{PostID: fmt.Sprintf("p%02d", n), AuthorID: "a", At: base.Add(time.Duration(n) * time.Second)}
		if err := s.Push(ctx, []string{"u"}, e); err != nil {
			t.Fatal(err)
		}
		keys := client.Keys(ctx, "{"+prefix+":*").Val()
		members := int64(0)
		for _, k := range keys {
			if client.Type(ctx, k).Val() == "zset" {
				members = client.ZCard(ctx, k).Val() - 1 // the sentinel
			}
		}
		if want := int64(min(n+1, cap)); members != want {
			t.Fatalf("after %d pushes the timeline holds %d entries, want %d", n+1, members, want)
		}
	}
	p, err := s.Page(ctx, "u", timeline.Entry{}, 10)
	if err != nil || len(p.Entries) != cap || p.Entries[0].PostID != fmt.Sprintf("p%02d", cap+2) {
		t.Fatalf("page after the pushes: %+v, %v", p.Entries, err)
	}
}
