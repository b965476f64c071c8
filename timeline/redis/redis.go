// Package redis keeps home timelines in Redis sorted sets (seed 002 §2.5.4), for scale-out.
//
//	{<prefix>:<user>}:tl         sorted set: member "<post>!<author>", score = post time in ms;
//	                              the sentinel at score -inf (rank 0) marks that the timeline
//	                              exists and holds its state: "~" (complete, floor zero) or
//	                              "~<floor ms>:<floor post>:<build>" (floor empty for zero; build
//	                              empty once complete)
//	{<prefix>:post:<post>}:in    set of the users whose timeline holds the post
//
// Each key carries a hash tag, so the store works on Redis Cluster. A push runs a script (add only
// if the timeline exists, trim to the cap) for 256 timelines per call on a single node, and per
// timeline on a cluster, where a script's keys must share a slot; one pipeline per batch of users. Reads keep a timeline alive: one nobody reads expires and is
// rebuilt on its next read; so is every timeline if Redis loses its data.
package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/timeline"
)

// Options configure a Store.
type Options struct {
	Prefix string // key prefix (one deployment, or one test)
	timeline.Limits
	Clock rookery.Clock // nil means the system clock
}

// Store is a timeline.Store in Redis.
type Store struct {
	c      goredis.UniversalClient
	prefix string
	cap    int
	ttl    time.Duration
	idle   time.Duration
	clock  rookery.Clock
}

var _ timeline.Store = (*Store)(nil)

// New returns a Store on c (a single node, or a cluster client).
func New(c goredis.UniversalClient, o Options) *Store {
	l := o.Limits.WithDefaults()
	if o.Clock == nil {
		o.Clock = rookery.SystemClock
	}
	return &Store{c: c, prefix: o.Prefix, cap: l.Cap, ttl: l.TTL, idle: l.InactiveAfter, clock: o.Clock}
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

func checkUser(op rookery.Op, user string) error {
	if !rookery.ValidUserID(user) {
		return rookery.E(op, rookery.Invalid, "not a user id")
	}
	return nil
}

// lib is the Lua every script that writes a timeline's state or trims it shares (timeline.Store's
// invariant: the floor only rises, trims raise it to the newest entry they cut).
const lib = `
local function state(k)
  local s = redis.call('ZRANGE', k, 0, 0)[1]
  if not s then return nil end
  local ms, post, build = string.match(s, '^~(%d*):([^:]*):(.*)$')
  if not ms then return {s = s, post = '', build = ''} end
  return {s = s, ms = tonumber(ms), post = post, build = build}
end
local function save(k, st)
  local ms = ''
  if st.ms then ms = string.format('%d', st.ms) end
  local s = '~' .. ms .. ':' .. st.post .. ':' .. st.build
  if s ~= st.s then
    redis.call('ZREM', k, st.s)
    redis.call('ZADD', k, '-inf', s)
    st.s = s
  end
end
local function below(st, sc, p)
  return st.ms ~= nil and (sc < st.ms or (sc == st.ms and p < st.post))
end
local function raise(st, sc, p)
  if st.ms == nil or sc > st.ms or (sc == st.ms and p > st.post) then st.ms, st.post = sc, p end
end
local function postOf(m) return string.match(m, '^([^!]*)') end
local function trim(k, st, cap)
  local n = redis.call('ZCARD', k) - 1
  if n <= cap then return end
  local cut = redis.call('ZRANGE', k, n - cap, n - cap, 'WITHSCORES')
  raise(st, tonumber(cut[2]), postOf(cut[1]))
  redis.call('ZREMRANGEBYRANK', k, 1, n - cap)
  save(k, st)
end
`

// merge adds the score/member pairs ARGV[6..] that are not below the floor to an existing
// timeline, drops entries older than ARGV[1] (the TTL) and keeps the newest ARGV[2]. With a build
// ARGV[3] it is Complete: only a timeline being built by ARGV[3] takes them, its floor first
// raised to ARGV[4] ms, ARGV[5] post (ARGV[4] empty: zero), and it becomes complete. It returns 1
// if it wrote, else 0. It leaves the key's expiry alone: only reads keep a timeline alive.
var merge = goredis.NewScript(lib + `
local k = KEYS[1]
local st = state(k)
if not st then return 0 end
if ARGV[3] ~= '' then
  if st.build ~= ARGV[3] then return 0 end
  st.build = ''
  if ARGV[4] ~= '' then raise(st, tonumber(ARGV[4]), ARGV[5]) end
end
redis.call('ZREMRANGEBYSCORE', k, '(-inf', '(' .. ARGV[1])
for i = 6, #ARGV, 2 do
  if not below(st, tonumber(ARGV[i]), postOf(ARGV[i+1])) then redis.call('ZADD', k, ARGV[i], ARGV[i+1]) end
end
save(k, st)
trim(k, st, tonumber(ARGV[2]))
return 1`)

// begin makes a missing timeline exist, being built by ARGV[1], expiring in ARGV[2] ms; it returns
// the build of a timeline being built, and "" for a complete one.
var begin = goredis.NewScript(lib + `
local st = state(KEYS[1])
if st then return st.build end
redis.call('ZADD', KEYS[1], '-inf', '~::' .. ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return ARGV[1]`)

// dropOlder raises an existing timeline's floor to ARGV[1] ms, ARGV[2] post and removes the
// entries below it.
var dropOlder = goredis.NewScript(lib + `
local k = KEYS[1]
local st = state(k)
if not st then return 0 end
raise(st, tonumber(ARGV[1]), ARGV[2])
save(k, st)
redis.call('ZREMRANGEBYSCORE', k, '(-inf', '(' .. ARGV[1])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', k, ARGV[1], ARGV[1])) do
  if postOf(m) < ARGV[2] then redis.call('ZREM', k, m) end
end
return 1`)

// addArgs are merge's arguments (addEach's are its first four).
func (s *Store) addArgs(build string, floor timeline.Entry, entries []timeline.Entry) []any {
	fms := ""
	if floor.PostID != "" {
		fms = strconv.FormatInt(floor.At.UnixMilli(), 10)
	}
	args := []any{s.clock.Now().Add(-s.ttl).UnixMilli(), s.cap, build, fms, floor.PostID}
	for _, e := range entries {
		args = append(args, e.At.UnixMilli(), member(e))
	}
	return args
}

// hold records that the timelines of users hold the entries' posts, for RemovePost.
func (s *Store) hold(ctx context.Context, users []any, entries []timeline.Entry) error {
	if len(users) == 0 || len(entries) == 0 {
		return nil
	}
	p := s.c.Pipeline()
	for _, e := range entries {
		p.SAdd(ctx, s.postKey(e.PostID), users...)
		p.Expire(ctx, s.postKey(e.PostID), s.ttl)
	}
	_, err := p.Exec(ctx)
	return err
}

// addEach adds one entry (score ARGV[1], member ARGV[2]) to many timelines (KEYS), without
// dropping expired entries (Page does not show them; the cap and the key's expiry remove them): it
// returns, per key, 1 if the timeline exists and took the entry, else 0. One call for a batch of
// timelines spares Redis a script call per timeline (most of a push's cost); on a cluster a call
// takes one key, since a script's keys must share a slot. An entry below a timeline's floor is
// added too: Page never shows it, and the next trim takes it.
//
// A timeline holds its sentinel, so it exists exactly when ZCARD is above 0; and since every write
// trims to the cap, one with fewer than cap entries before the add (ZCARD <= cap, the sentinel
// counted) is within it after, and is not trimmed: a call saved on every timeline not yet full.
var addEach = goredis.NewScript(lib + `
local out = {}
local cap = tonumber(ARGV[3])
for k = 1, #KEYS do
  local n = redis.call('ZCARD', KEYS[k])
  if n > 0 then
    redis.call('ZADD', KEYS[k], ARGV[1], ARGV[2])
    if n > cap then trim(KEYS[k], state(KEYS[k]), cap) end
    out[k] = 1
  else
    out[k] = 0
  end
end
return out`)

// pushBatch is how many timelines one addEach call takes on a single node: Redis runs nothing
// else while a script runs, so a call is kept to about a millisecond.
const pushBatch = 256

// Push implements timeline.Store: one pipeline for the batch of users, of one addEach call per
// pushBatch timelines (per timeline on a cluster).
func (s *Store) Push(ctx context.Context, users []string, e timeline.Entry) error {
	const op rookery.Op = "redis.Push"
	keys := make([]string, len(users))
	for i, u := range users {
		if err := checkUser(op, u); err != nil {
			return err
		}
		keys[i] = s.tlKey(u)
	}
	batch := pushBatch
	if _, cluster := s.c.(*goredis.ClusterClient); cluster {
		batch = 1
	}
	args := []any{e.At.UnixMilli(), member(e), s.cap}
	cmds, err := s.evalSha(ctx, addEach, func(pipe goredis.Pipeliner) {
		for chunk := range slices.Chunk(keys, batch) {
			addEach.EvalSha(ctx, pipe, chunk, args...)
		}
	})
	if err != nil {
		return translate(op, err)
	}
	var holders []any
	i := 0 // the user of the next flag: the calls' flags follow users' order
	for _, c := range cmds {
		flags, _ := c.(*goredis.Cmd).Int64Slice()
		for _, f := range flags {
			if f == 1 {
				holders = append(holders, users[i])
			}
			i++
		}
	}
	return translate(op, s.hold(ctx, holders, []timeline.Entry{e}))
}

// evalSha runs the calls of script (EVALSHA) that fill adds to a pipeline. If Redis does not have
// the script (a restart, SCRIPT FLUSH) it loads it, on every node of a cluster, and runs the
// pipeline again (the script must be idempotent), up to three times.
func (s *Store) evalSha(ctx context.Context, script *goredis.Script, fill func(goredis.Pipeliner)) ([]goredis.Cmder, error) {
	for attempt := 0; ; attempt++ {
		pipe := s.c.Pipeline()
		fill(pipe)
		cmds, err := pipe.Exec(ctx)
		if err == nil || errors.Is(err, goredis.Nil) {
			return cmds, nil
		}
		if attempt == 3 || !goredis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, err
		}
		if err := script.Load(ctx, s.c).Err(); err != nil {
			return nil, err
		}
	}
}

// Complete implements timeline.Store: one script checks the build and writes.
func (s *Store) Complete(ctx context.Context, user, build string, entries []timeline.Entry, floor timeline.Entry) (bool, error) {
	if build == "" {
		return false, rookery.E("redis.Complete", rookery.Invalid, "no build")
	}
	return s.addWith(ctx, "redis.Complete", user, build, floor, entries)
}

// Merge implements timeline.Store: one script reads the floor and adds the entries not below it.
func (s *Store) Merge(ctx context.Context, user string, entries []timeline.Entry) error {
	if len(entries) == 0 {
		return checkUser("redis.Merge", user)
	}
	_, err := s.addWith(ctx, "redis.Merge", user, "", timeline.Entry{}, entries)
	return err
}

// addWith runs merge for entries on user's timeline and records the holder in the post index. The
// index may name a timeline that did not take a post (below the floor): RemovePost then finds
// nothing to remove there.
func (s *Store) addWith(ctx context.Context, op rookery.Op, user, build string, floor timeline.Entry, entries []timeline.Entry) (bool, error) {
	if err := checkUser(op, user); err != nil {
		return false, err
	}
	n, err := merge.Run(ctx, s.c, []string{s.tlKey(user)}, s.addArgs(build, floor, entries)...).Int()
	if err != nil || n == 0 {
		return false, translate(op, err)
	}
	return true, translate(op, s.hold(ctx, []any{user}, entries))
}

// Begin implements timeline.Store.
func (s *Store) Begin(ctx context.Context, user string) (string, error) {
	const op rookery.Op = "redis.Begin"
	if err := checkUser(op, user); err != nil {
		return "", err
	}
	build, err := begin.Run(ctx, s.c, []string{s.tlKey(user)}, timeline.NewBuild(), s.idle.Milliseconds()).Text()
	return build, translate(op, err)
}

// parseSentinel returns the state a sentinel holds.
func parseSentinel(m string) (floor timeline.Entry, building bool) {
	parts := strings.SplitN(strings.TrimPrefix(m, sentinel), ":", 3)
	if len(parts) != 3 {
		return timeline.Entry{}, false // "~": complete, floor zero
	}
	if ms, err := strconv.ParseInt(parts[0], 10, 64); err == nil {
		floor = timeline.Entry{PostID: parts[1], At: time.UnixMilli(ms).UTC()}
	}
	return floor, parts[2] != ""
}

// Page implements timeline.Store: one round trip that refreshes the timeline's expiry (which
// reports whether it exists), reads the entries at before's millisecond (ties) and the older ones,
// down to the TTL: older entries may still be stored (pushes leave them to the cap), never shown.
func (s *Store) Page(ctx context.Context, user string, before timeline.Entry, limit int) (timeline.Page, error) {
	const op rookery.Op = "redis.Page"
	if err := checkUser(op, user); err != nil {
		return timeline.Page{}, err
	}
	if limit < 1 || limit > 100 {
		return timeline.Page{}, rookery.E(op, rookery.Invalid, "limit must be 1 to 100")
	}
	k := s.tlKey(user)
	pipe := s.c.TxPipeline() // one atomic read: the state and the entries agree
	exists := pipe.Expire(ctx, k, s.idle)
	state := pipe.ZRange(ctx, k, 0, 0)
	var ties *goredis.ZSliceCmd
	max := "+inf"
	if before.PostID != "" {
		ms := strconv.FormatInt(before.At.UnixMilli(), 10)
		ties = pipe.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: k, Start: ms, Stop: ms, ByScore: true, Rev: true})
		max = "(" + ms
	}
	cutoff := s.clock.Now().Add(-s.ttl).UnixMilli()
	older := pipe.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: k, Start: max, Stop: strconv.FormatInt(cutoff, 10), ByScore: true, Rev: true, Count: int64(limit)})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return timeline.Page{}, translate(op, err)
	}
	if !exists.Val() || len(state.Val()) == 0 {
		return timeline.Page{}, nil
	}
	floor, building := parseSentinel(state.Val()[0])
	if building {
		return timeline.Page{}, nil
	}
	var zs []goredis.Z
	if ties != nil {
		for _, z := range ties.Val() {
			if post, _, _ := strings.Cut(z.Member.(string), sep); post < before.PostID && int64(z.Score) >= cutoff {
				zs = append(zs, z)
			}
		}
	}
	zs = append(zs, older.Val()...)
	page := timeline.Page{Exists: true}
	for _, z := range zs[:min(len(zs), limit)] {
		post, author, _ := strings.Cut(z.Member.(string), sep)
		e := timeline.Entry{PostID: post, AuthorID: author, At: time.UnixMilli(int64(z.Score)).UTC()}
		if e.Below(floor) {
			break // so is every later one
		}
		page.Entries = append(page.Entries, e)
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
	if err := checkUser(op, user); err != nil {
		return err
	}
	k := s.tlKey(user)
	pipe := s.c.TxPipeline()
	pipe.Del(ctx, k)
	pipe.ZAdd(ctx, k, goredis.Z{Score: math.Inf(-1), Member: sentinel})
	pipe.Expire(ctx, k, s.idle)
	if _, err := pipe.Exec(ctx); err != nil {
		return translate(op, err)
	}
	_, err := s.addWith(ctx, op, user, "", timeline.Entry{}, entries)
	return err
}

// Delete implements timeline.Store. The sets of timelines by post may still name the user;
// RemovePost then finds nothing to remove there.
func (s *Store) Delete(ctx context.Context, user string) error {
	const op rookery.Op = "redis.Delete"
	if err := checkUser(op, user); err != nil {
		return err
	}
	return translate(op, s.c.Del(ctx, s.tlKey(user)).Err())
}

// DropOlder implements timeline.Store: one script.
func (s *Store) DropOlder(ctx context.Context, user string, e timeline.Entry) error {
	const op rookery.Op = "redis.DropOlder"
	if err := checkUser(op, user); err != nil {
		return err
	}
	return translate(op, dropOlder.Run(ctx, s.c, []string{s.tlKey(user)}, e.At.UnixMilli(), e.PostID).Err())
}

// Remove implements timeline.Store: the script that RemovePost runs per timeline, on one.
func (s *Store) Remove(ctx context.Context, user, postID string) error {
	const op rookery.Op = "redis.Remove"
	if err := checkUser(op, user); err != nil {
		return err
	}
	return translate(op, removeByPrefix.Run(ctx, s.c, []string{s.tlKey(user)}, postID+sep).Err())
}

// RemoveAuthor implements timeline.Store: it reads the timeline's members and removes the author's.
func (s *Store) RemoveAuthor(ctx context.Context, user, author string) error {
	const op rookery.Op = "redis.RemoveAuthor"
	if err := checkUser(op, user); err != nil {
		return err
	}
	ms, err := s.c.ZRange(ctx, s.tlKey(user), 0, -1).Result()
	if err != nil {
		return translate(op, err)
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
	return translate(op, s.c.ZRem(ctx, s.tlKey(user), gone...).Err())
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
		removeByPrefix.Eval(ctx, pipe, []string{s.tlKey(u)}, postID+sep)
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

// Drop deletes every key of the store's prefix (tests and benchmarks clean up with it).
func (s *Store) Drop(ctx context.Context) error {
	iter := s.c.Scan(ctx, 0, "{"+s.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := s.c.Del(ctx, iter.Val()).Err(); err != nil {
			return translate("redis.Drop", err)
		}
	}
	return translate("redis.Drop", iter.Err())
}

// String names the store in logs.
func (s *Store) String() string { return fmt.Sprintf("redis timelines %q (cap %d)", s.prefix, s.cap) }

// ClientOptions are the options Rookery's Redis clients use for addrs (one address, or a
// cluster's): they fail fast when Redis is down, so that a feed read falls back to pulling within
// milliseconds instead of waiting out go-redis's default retries (up to seconds per command).
func ClientOptions(addrs []string) *goredis.UniversalOptions {
	return &goredis.UniversalOptions{
		Addrs:         addrs,
		MaxRetries:    1,
		DialerRetries: 1,
		DialTimeout:   time.Second,
		ReadTimeout:   time.Second,
		WriteTimeout:  time.Second,
	}
}
