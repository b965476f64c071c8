// Package redis keeps home timelines in Redis sorted sets (seed 002 §2.5.4), for scale-out.
//
//	{<prefix>:<user>}:tl         sorted set: member "<post>!<author>", score = post time in ms;
//	                              member "~" at score -inf marks that the timeline exists
//	{<prefix>:post:<post>}:in    set of the users whose timeline holds the post
//
// Each key carries a hash tag, so every command touches one slot and the store works on Redis
// Cluster. Pushes run a script per timeline (add only if the timeline exists, drop entries past the
// TTL, trim to the cap, refresh the key's expiry), one pipeline per batch of users. A timeline nobody
// pushes to expires with its TTL and is rebuilt on its next read; so does every timeline if Redis
// loses its data.
package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Options configure a Store.
type Options struct {
	Prefix string // key prefix (one deployment, or one test)
	// CursorKey signs page cursors (shared by every API node). Required.
	CursorKey []byte
	Cap       int           // 0 means timeline.DefaultCap
	TTL       time.Duration // 0 means 30 days
}

// Store is a timeline.Store in Redis.
type Store struct {
	cursors *table.Cursors
	c       goredis.UniversalClient
	prefix  string
	cap     int
	ttl     time.Duration
}

var _ timeline.Store = (*Store)(nil)

// New returns a Store on c (a single node, or a cluster client).
func New(c goredis.UniversalClient, o Options) *Store {
	if o.Cap <= 0 {
		o.Cap = timeline.DefaultCap
	}
	if o.TTL <= 0 {
		o.TTL = 30 * 24 * time.Hour
	}
	return &Store{c: c, prefix: o.Prefix, cap: o.Cap, ttl: o.TTL, cursors: table.NewCursors(o.CursorKey)}
}

const sentinel = "~"

func (s *Store) tlKey(user string) string   { return "{" + s.prefix + ":" + user + "}:tl" }
func (s *Store) postKey(post string) string { return "{" + s.prefix + ":post:" + post + "}:in" }

// sep joins post and author in a member. It sorts below every character of an id, so that members
// with equal scores sort as their post ids do.
const sep = "!"

func member(e timeline.Entry) string { return e.PostID + sep + e.AuthorID }

func translate(op rookery.Op, err error) error {
	if err == nil || errors.Is(err, goredis.Nil) {
		return nil
	}
	return rookery.E(op, rookery.Unavailable, "Redis is unavailable", err)
}

// push adds ARGV[2] at score ARGV[1] if the timeline exists, drops entries older than ARGV[3],
// keeps the newest ARGV[4] entries (rank 0 is the sentinel), and refreshes the expiry ARGV[5] s.
var push = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(-inf', '(' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 1, -(tonumber(ARGV[4]) + 1))
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1`)

// Push implements timeline.Store: one pipeline for the batch of users.
func (s *Store) Push(ctx context.Context, users []string, e timeline.Entry) error {
	const op rookery.Op = "redis.Push"
	oldest := time.Now().Add(-s.ttl).UnixMilli()
	pipe := s.c.Pipeline()
	for _, u := range users {
		if !rookery.ValidUserID(u) {
			return rookery.E(op, rookery.Invalid, "not a user id")
		}
		// EVAL, not EVALSHA: a pipeline cannot fall back when Redis's script cache is empty.
		push.Eval(ctx, pipe, []string{s.tlKey(u)}, e.At.UnixMilli(), member(e), oldest, s.cap, int(s.ttl.Seconds()))
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, goredis.Nil) {
		return translate(op, err)
	}
	// Record which timelines hold the post, for RemovePost.
	var holders []any
	for i, c := range cmds {
		if n, _ := c.(*goredis.Cmd).Int(); n == 1 {
			holders = append(holders, users[i])
		}
	}
	if len(holders) > 0 {
		p := s.c.Pipeline()
		p.SAdd(ctx, s.postKey(e.PostID), holders...)
		p.Expire(ctx, s.postKey(e.PostID), s.ttl)
		if _, err := p.Exec(ctx); err != nil {
			return translate(op, err)
		}
	}
	return nil
}

// Page implements timeline.Store. The cursor seals the last entry's score and member, bound to the
// user (table.Cursors); the next page starts strictly after it in (score desc, member desc) order.
func (s *Store) Page(ctx context.Context, user, cursor string, limit int) (timeline.Page, error) {
	const op rookery.Op = "redis.Page"
	if !rookery.ValidUserID(user) {
		return timeline.Page{}, rookery.E(op, rookery.Invalid, "not a user id")
	}
	if limit < 1 || limit > 100 {
		return timeline.Page{}, rookery.E(op, rookery.Invalid, "limit must be 1 to 100")
	}
	max, after := "+inf", ""
	bound := table.Query{Index: "timeline", PK: user}
	if cursor != "" {
		bound.Cursor = cursor
		pos, err := s.cursors.Open(op, bound)
		if err != nil {
			return timeline.Page{}, err
		}
		max, after = pos.IndexSK, pos.Key.SK
	}
	// Entries at the cursor's own score that sort at or above it are skipped: ask for enough more.
	res, err := s.c.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{
		Key: s.tlKey(user), Start: max, Stop: "(-inf", ByScore: true, Rev: true, Count: int64(limit + 64),
	}).Result()
	if err != nil {
		return timeline.Page{}, translate(op, err)
	}
	if cursor == "" && len(res) == 0 {
		exists, err := s.Exists(ctx, user)
		if err != nil || !exists {
			return timeline.Page{}, err
		}
	}
	page := timeline.Page{Exists: true}
	var last goredis.Z
	more := false
	for _, z := range res {
		m := z.Member.(string)
		if after != "" && strconv.FormatInt(int64(z.Score), 10) == max && m >= after {
			continue
		}
		if len(page.Entries) == limit {
			more = true
			break
		}
		post, author, _ := strings.Cut(m, sep)
		page.Entries = append(page.Entries, timeline.Entry{PostID: post, AuthorID: author, At: time.UnixMilli(int64(z.Score)).UTC()})
		last = z
	}
	if !more && int64(len(res)) == int64(limit+64) {
		more = len(page.Entries) > 0 // a full answer: there may be more
	}
	if more {
		page.Next = s.cursors.Seal(bound, table.Position{Key: table.Key{PK: user, SK: last.Member.(string)}, IndexSK: strconv.FormatInt(int64(last.Score), 10)})
	}
	return page, nil
}

// Exists implements timeline.Store.
func (s *Store) Exists(ctx context.Context, user string) (bool, error) {
	n, err := s.c.Exists(ctx, s.tlKey(user)).Result()
	return n == 1, translate("redis.Exists", err)
}

// Create implements timeline.Store.
func (s *Store) Create(ctx context.Context, user string, entries []timeline.Entry) error {
	const op rookery.Op = "redis.Create"
	if !rookery.ValidUserID(user) {
		return rookery.E(op, rookery.Invalid, "not a user id")
	}
	k := s.tlKey(user)
	zs := []goredis.Z{{Score: math.Inf(-1), Member: sentinel}}
	for _, e := range entries {
		zs = append(zs, goredis.Z{Score: float64(e.At.UnixMilli()), Member: member(e)})
	}
	pipe := s.c.TxPipeline()
	pipe.Del(ctx, k)
	pipe.ZAdd(ctx, k, zs...)
	pipe.ZRemRangeByRank(ctx, k, 1, -int64(s.cap+1))
	pipe.Expire(ctx, k, s.ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return translate(op, err)
	}
	p := s.c.Pipeline()
	for _, e := range entries {
		p.SAdd(ctx, s.postKey(e.PostID), user)
		p.Expire(ctx, s.postKey(e.PostID), s.ttl)
	}
	if len(entries) > 0 {
		if _, err := p.Exec(ctx); err != nil {
			return translate(op, err)
		}
	}
	return nil
}

// Remove implements timeline.Store.
func (s *Store) Remove(ctx context.Context, user, postID string) error {
	ms, err := s.members(ctx, user)
	if err != nil {
		return err
	}
	var gone []any
	for _, m := range ms {
		if strings.HasPrefix(m, postID+sep) {
			gone = append(gone, m)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return translate("redis.Remove", s.c.ZRem(ctx, s.tlKey(user), gone...).Err())
}

// RemoveAuthor implements timeline.Store.
func (s *Store) RemoveAuthor(ctx context.Context, user, author string) error {
	ms, err := s.members(ctx, user)
	if err != nil {
		return err
	}
	var gone []any
	for _, m := range ms {
		if strings.HasSuffix(m, sep+author) {
			gone = append(gone, m)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return translate("redis.RemoveAuthor", s.c.ZRem(ctx, s.tlKey(user), gone...).Err())
}

func (s *Store) members(ctx context.Context, user string) ([]string, error) {
	if !rookery.ValidUserID(user) {
		return nil, rookery.E(rookery.Op("redis.Remove"), rookery.Invalid, "not a user id")
	}
	ms, err := s.c.ZRange(ctx, s.tlKey(user), 0, -1).Result()
	return ms, translate("redis.Remove", err)
}

// RemovePost implements timeline.Store: it reads the set of timelines holding the post and removes
// the post from each (one pipeline), O(copies).
func (s *Store) RemovePost(ctx context.Context, postID string) error {
	const op rookery.Op = "redis.RemovePost"
	users, err := s.c.SMembers(ctx, s.postKey(postID)).Result()
	if err != nil {
		return translate(op, err)
	}
	if len(users) == 0 {
		return nil
	}
	// Members carry the author; read each timeline's member for the post, then remove it.
	pipe := s.c.Pipeline()
	for _, u := range users {
		s.removeScript(ctx, pipe, u, postID)
	}
	pipe.Del(ctx, s.postKey(postID))
	_, err = pipe.Exec(ctx)
	if err != nil && !errors.Is(err, goredis.Nil) {
		return translate(op, err)
	}
	return nil
}

// removeByPrefix removes from a sorted set the members that start with ARGV[1].
var removeByPrefix = goredis.NewScript(`
local ms = redis.call('ZRANGE', KEYS[1], 0, -1)
local n = 0
for _, m in ipairs(ms) do
  if string.sub(m, 1, string.len(ARGV[1])) == ARGV[1] then redis.call('ZREM', KEYS[1], m); n = n + 1 end
end
return n`)

func (s *Store) removeScript(ctx context.Context, pipe goredis.Pipeliner, user, postID string) {
	removeByPrefix.Eval(ctx, pipe, []string{s.tlKey(user)}, postID+sep)
}

// String names the store in logs.
func (s *Store) String() string { return fmt.Sprintf("redis timelines %q (cap %d)", s.prefix, s.cap) }
