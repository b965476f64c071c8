package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/graph"
)

// RedisListTarget is the second baseline: the naive Redis timeline of seed 002. A post is a
// hash; creating one LPUSHes its id onto every follower's list and LTRIMs it to 800, in the
// request; a feed read is LRANGE, then the post bodies one by one in a pipeline (hydrated: with
// their like counts and the reader's likes, then their authors' profiles in a second pipeline, as
// the PostgreSQL baseline joins its users). Deleted posts stay in the lists (reads skip bodies that
// are gone). Keys carry the prefix.
type RedisListTarget struct {
	c      goredis.UniversalClient
	prefix string
	// Hydrated reads each post whole, with its like count and whether the reader liked it, into
	// Reply.Rows (rookery bench front). Unset: the raw floor.
	Hydrated bool
}

// NewRedisListTarget uses the Redis at addr with keys under prefix.
func NewRedisListTarget(addr, prefix string) *RedisListTarget {
	return &RedisListTarget{c: goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 256}), prefix: prefix}
}

func (t *RedisListTarget) key(parts ...any) string {
	k := t.prefix
	for _, p := range parts {
		k += ":" + fmt.Sprint(p)
	}
	return k
}

// Load writes g's users' profiles and follow sets (both directions), replacing the prefix's keys.
func (t *RedisListTarget) Load(ctx context.Context, g graph.Graph, progress io.Writer) error {
	if err := t.Drop(ctx); err != nil {
		return err
	}
	pipe := t.c.Pipeline()
	for i := range g.Nodes {
		pipe.HSet(ctx, t.key("user", i), "username", "u"+strconv.Itoa(i))
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	for i, e := range g.Edges {
		pipe.SAdd(ctx, t.key("followers", e[1]), e[0])
		pipe.SAdd(ctx, t.key("following", e[0]), e[1])
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	fmt.Fprintf(progress, "redis list baseline: loaded %d follows under %s\n", len(g.Edges), t.prefix)
	return nil
}

// Drop deletes every key under the prefix.
func (t *RedisListTarget) Drop(ctx context.Context) error {
	iter := t.c.Scan(ctx, 0, t.prefix+":*", 5000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := t.c.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return iter.Err()
}

// authors sets each row's author's username, read in one pipeline for the distinct authors.
func (t *RedisListTarget) authors(ctx context.Context, rows []PostRow) error {
	if len(rows) == 0 {
		return nil
	}
	pipe := t.c.Pipeline()
	names := map[int]*goredis.StringCmd{}
	for _, r := range rows {
		if names[r.Author] == nil {
			names[r.Author] = pipe.HGet(ctx, t.key("user", r.Author), "username")
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != goredis.Nil {
		return err
	}
	for i := range rows {
		rows[i].Username = names[rows[i].Author].Val()
	}
	return nil
}

// Close closes the client.
func (t *RedisListTarget) Close() { t.c.Close() }

// Do implements Target; statuses mirror the HTTP API's.
func (t *RedisListTarget) Do(ctx context.Context, r Request) Reply {
	u := r.User
	switch r.Op {
	case OpFeed, OpUser:
		list := t.key("tl", u)
		if r.Op == OpUser {
			list = t.key("posts", u)
		}
		ids, err := t.c.LRange(ctx, list, 0, int64(r.pageSize(DSBPageSize)-1)).Result()
		if err != nil {
			return Reply{Status: 500}
		}
		pipe := t.c.Pipeline()
		bodies := make([]*goredis.MapStringStringCmd, len(ids))
		likes := make([]*goredis.IntCmd, len(ids))
		liked := make([]*goredis.BoolCmd, len(ids))
		for i, id := range ids {
			bodies[i] = pipe.HGetAll(ctx, t.key("post", id))
			if t.Hydrated {
				likes[i] = pipe.SCard(ctx, t.key("likes", id))
				liked[i] = pipe.SIsMember(ctx, t.key("likes", id), u)
			}
		}
		if len(ids) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return Reply{Status: 500}
			}
		}
		rep := Reply{Status: 200}
		for i, b := range bodies {
			body := b.Val()
			if len(body) == 0 {
				continue
			}
			rep.Feed = append(rep.Feed, ids[i])
			if t.Hydrated {
				author, _ := strconv.Atoi(body["author"])
				ms, _ := strconv.ParseInt(body["created_at"], 10, 64)
				rep.Rows = append(rep.Rows, PostRow{ID: ids[i], Author: author, Text: body["text"], CreatedAt: time.UnixMilli(ms).UTC(),
					Likes: likes[i].Val(), LikedByMe: liked[i].Val()})
			}
		}
		if err := t.authors(ctx, rep.Rows); err != nil {
			return Reply{Status: 500}
		}
		return rep
	case OpPost:
		n, err := t.c.Incr(ctx, t.key("seq")).Result()
		if err != nil {
			return Reply{Status: 500}
		}
		id := strconv.FormatInt(n, 10)
		followers, err := t.c.SMembers(ctx, t.key("followers", u)).Result()
		if err != nil {
			return Reply{Status: 500}
		}
		pipe := t.c.Pipeline()
		pipe.HSet(ctx, t.key("post", id), "author", u, "text", r.Text, "created_at", time.Now().UnixMilli())
		pipe.LPush(ctx, t.key("posts", u), id)
		for _, f := range append(followers, strconv.Itoa(u)) {
			pipe.LPush(ctx, t.key("tl", f), id)
			pipe.LTrim(ctx, t.key("tl", f), 0, 799)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return Reply{Status: 500}
		}
		return Reply{Status: 201, PostID: id}
	case OpFollow, OpUnfollow:
		pipe := t.c.Pipeline()
		if r.Op == OpFollow {
			pipe.SAdd(ctx, t.key("followers", r.Other), u)
			pipe.SAdd(ctx, t.key("following", u), r.Other)
		} else {
			pipe.SRem(ctx, t.key("followers", r.Other), u)
			pipe.SRem(ctx, t.key("following", u), r.Other)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return Reply{Status: 500}
		}
		return Reply{Status: 200}
	case OpLike:
		if err := t.c.SAdd(ctx, t.key("likes", r.PostID), u).Err(); err != nil {
			return Reply{Status: 500}
		}
		return Reply{Status: 200}
	case OpDelete:
		if err := t.c.Del(ctx, t.key("post", r.PostID)).Err(); err != nil {
			return Reply{Status: 500}
		}
		return Reply{Status: 204}
	}
	return Reply{Status: 400}
}
