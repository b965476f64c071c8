package bench_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/internal/testenv"
)

// The baselines need the PostgreSQL and Redis of internal/testenv (scripts/test.sh starts them for
// the run); each test works in a schema or key prefix of its own and removes it.
func baselines(t *testing.T) map[string]bench.Target {
	ctx := context.Background()
	name := fmt.Sprintf("rookerytest_%d", time.Now().UnixNano())
	url := testenv.PostgresURL()
	pg, err := bench.NewPostgresTarget(ctx, url, name, 8)
	if err != nil {
		t.Fatalf("PostgreSQL at %s: %v", url, err)
	}
	t.Cleanup(func() { pg.Drop(ctx) })
	addr := testenv.RedisAddr()
	rl := bench.NewRedisListTarget(addr, name)
	t.Cleanup(func() { rl.Drop(ctx); rl.Close() })
	if err := pg.Load(ctx, tiny, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := rl.Load(ctx, tiny, io.Discard); err != nil {
		t.Fatal(err)
	}
	return map[string]bench.Target{"postgres": pg, "redis-list": rl}
}

// TestBaselinesServeTheFeed: a post reaches its author's followers' feeds (and the author's own),
// newest first; a delete hides it; unfollowing hides it in the fan-out-on-read baseline.
func TestBaselinesServeTheFeed(t *testing.T) {
	ctx := context.Background()
	for name, tg := range baselines(t) {
		t.Run(name, func(t *testing.T) {
			// tiny: 0, 2 and 3 follow 1; 1 follows 0.
			p1 := tg.Do(ctx, bench.Request{Op: bench.OpPost, User: 1, Text: "one"})
			time.Sleep(2 * time.Millisecond)
			p2 := tg.Do(ctx, bench.Request{Op: bench.OpPost, User: 1, Text: "two"})
			if p1.Status != 201 || p2.Status != 201 {
				t.Fatalf("posts = %+v %+v", p1, p2)
			}
			for _, u := range []int{0, 1, 2, 3} {
				if f := tg.Do(ctx, bench.Request{Op: bench.OpFeed, User: u}); !slices.Equal(f.Feed, []string{p2.PostID, p1.PostID}) {
					t.Fatalf("user %d's feed = %v", u, f.Feed)
				}
			}
			if f := tg.Do(ctx, bench.Request{Op: bench.OpUser, User: 1}); len(f.Feed) != 2 {
				t.Fatalf("user posts = %v", f.Feed)
			}
			if r := tg.Do(ctx, bench.Request{Op: bench.OpLike, User: 0, PostID: p1.PostID}); r.Status != 200 {
				t.Fatalf("like = %+v", r)
			}
			if r := tg.Do(ctx, bench.Request{Op: bench.OpDelete, User: 1, PostID: p2.PostID}); r.Status != 204 {
				t.Fatalf("delete = %+v", r)
			}
			if f := tg.Do(ctx, bench.Request{Op: bench.OpFeed, User: 0}); !slices.Equal(f.Feed, []string{p1.PostID}) {
				t.Fatalf("feed after the delete = %v", f.Feed)
			}
			// Hydrated (for the HTTP front), a read also gives each post whole: author (read from the
			// baseline's users), text, likes and whether the reader liked it.
			switch b := tg.(type) {
			case *bench.PostgresTarget:
				b.Hydrated = true
				defer func() { b.Hydrated = false }()
			case *bench.RedisListTarget:
				b.Hydrated = true
				defer func() { b.Hydrated = false }()
			}
			f := tg.Do(ctx, bench.Request{Op: bench.OpFeed, User: 0})
			if len(f.Rows) != 1 {
				t.Fatalf("hydrated feed = %+v", f)
			}
			if r := f.Rows[0]; r.ID != p1.PostID || r.Author != 1 || r.Username != "u1" || r.Text != "one" || r.Likes != 1 || !r.LikedByMe || time.Since(r.CreatedAt) > time.Minute {
				t.Fatalf("hydrated row = %+v", r)
			}
			if f := tg.Do(ctx, bench.Request{Op: bench.OpFeed, User: 2}); len(f.Rows) != 1 || f.Rows[0].LikedByMe {
				t.Fatalf("another reader's hydrated feed = %+v", f.Rows)
			}
			// A short run of the write-heavy mix works end to end.
			r, err := bench.Run(ctx, tg, bench.Config{Graph: tiny, Mix: bench.Mixes["write-heavy"], Rate: 100, Duration: 500 * time.Millisecond, Prefix: "g", Seed: 3})
			if err != nil || r.ErrorRate != 0 {
				t.Fatalf("run: %v, %+v", err, r.Ops)
			}
		})
	}
}
