package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// Leaderboards (seed 001 StreakLeaderboard, seed 000 FEED-010).
//
// Top streaks: every streak record with a streak carries its streak as of its last active day in
// GSI2, in one of StreakShards partitions chosen by a hash of the user, so that no index partition
// takes every write. A read queries every shard newest-first, skips the streaks that are broken by
// the day it is read on (they leave the board without a write), and merges.
//
// Top authors: a consumer keeps, per author, a score item for each day (UTC), ISO week and month,
// whose GSI2 key sorts the period's authors by score, so one Query reads a period's board.
// Posts count in the periods of their creation, likes in those of the like. Deleted posts and
// undone likes count no more: the consumer remembers each like it counted (LBPOST#<post>/LIKE#) and
// each post's likes per day (LIKES#<date>). A post's deletion marks its record deleted first; from
// then on the like and unlike events of that post check the mark in their transactions and change
// nothing, so the per-day tallies the deletion subtracts cannot change under it.

// LeaderboardsGroup is the consumer group that keeps the authors leaderboard.
const LeaderboardsGroup = "leaderboards"

// Periods of the authors leaderboard.
var Periods = []string{"day", "week", "month"}

// periodKey returns the key of the period containing t (in UTC): 2026-11-22, 2026-W47, 2026-11.
func periodKey(period string, t time.Time) string {
	t = t.UTC()
	switch period {
	case "week":
		y, w := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w)
	case "month":
		return t.Format("2006-01")
	}
	return t.Format(time.DateOnly)
}

// StreakRank is one row of the streak leaderboard.
type StreakRank struct {
	UserID        string `json:"user_id"`
	CurrentStreak int    `json:"current_streak"`
}

// AuthorRank is one row of the authors leaderboard.
type AuthorRank struct {
	UserID        string `json:"user_id"`
	Score         int64  `json:"score"`
	Posts         int64  `json:"posts"`
	LikesReceived int64  `json:"likes_received"`
}

// boardCache keeps leaderboard reads for a short while (seed 001: top 100 cached, refreshed each
// minute), so that a board shown on every app open costs a query now and then.
type boardCache struct {
	mu sync.Mutex
	m  map[string]boardEntry
}

type boardEntry struct {
	at  time.Time
	val any
}

func (c *boardCache) get(key string, now time.Time, ttl time.Duration) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e.val, ok && now.Sub(e.at) < ttl
}

func (c *boardCache) put(key string, now time.Time, val any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 1000 {
		c.m = map[string]boardEntry{}
	}
	c.m[key] = boardEntry{at: now, val: val}
}

// brokenFor is how long a broken streak stays in the index before a read takes it out.
const brokenFor = 7

// TopStreaks returns the longest current streaks, longest first (ties by user id). Streaks broken
// by today (in each user's time zone) are not on it.
func (a *App) TopStreaks(ctx context.Context, limit int) ([]StreakRank, error) {
	const op rookery.Op = "app.TopStreaks"
	if err := limitErr(op, limit); err != nil {
		return nil, err
	}
	if _, err := caller(ctx, op); err != nil {
		return nil, err
	}
	now := a.clock.Now()
	ckey := fmt.Sprintf("streaks:%d", limit)
	if v, ok := a.boards.get(ckey, now, a.eng.BoardCache); ok {
		return withoutGone(ctx, a, v.([]StreakRank), func(r StreakRank) string { return r.UserID })
	}
	shards := make([][]StreakRank, a.eng.StreakShards)
	errs := make([]error, a.eng.StreakShards)
	var wg sync.WaitGroup
	for s := range a.eng.StreakShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards[s], errs[s] = a.topStreaksOf(ctx, s, limit, now)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := slices.Concat(shards...)
	slices.SortFunc(out, func(x, y StreakRank) int {
		if x.CurrentStreak != y.CurrentStreak {
			return y.CurrentStreak - x.CurrentStreak
		}
		return strings.Compare(x.UserID, y.UserID)
	})
	out = out[:min(limit, len(out))]
	a.boards.put(ckey, now, out)
	return withoutGone(ctx, a, out, func(r StreakRank) string { return r.UserID })
}

var errEnough = errors.New("enough")

// topStreaksOf returns the limit longest unbroken streaks of one shard, and takes streaks broken
// for more than brokenFor days out of the index.
func (a *App) topStreaksOf(ctx context.Context, shard, limit int, now time.Time) ([]StreakRank, error) {
	var out []StreakRank
	err := table.EachPage(ctx, a.table, withLimit(streakBoardQuery(shard), limit), func(items []table.Item) error {
		for _, it := range items {
			r, err := streakFromItem(it)
			if err != nil {
				continue
			}
			if cur := r.view(now).CurrentStreak; cur > 0 {
				out = append(out, StreakRank{UserID: r.User, CurrentStreak: cur})
				if len(out) == limit {
					return errEnough
				}
				continue
			}
			if sum := r.State.Summary(); streak.DateOf(now, r.location())-sum.Last > brokenFor {
				// Best effort: a failed or lost removal leaves an entry the next read skips again.
				_, _ = a.table.Update(ctx, streakKey(r.User), table.Update{Remove: leaveIndex(gsi2)}, table.VersionIs("version", r.Version))
			}
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return out, err
}

// TopAuthors returns the authors with the highest scores (posts made x PostWeight + likes received x
// LikeWeight) in the period ("day", "week" or "month"; default day) that contains the date at
// (YYYY-MM-DD, UTC; default today).
func (a *App) TopAuthors(ctx context.Context, period, at string, limit int) ([]AuthorRank, error) {
	const op rookery.Op = "app.TopAuthors"
	var fe rookery.FieldErrors
	if period == "" {
		period = "day"
	}
	if !slices.Contains(Periods, period) {
		fe.Add("period", "must be day, week or month")
	}
	day := a.clock.Now().UTC()
	if at != "" {
		d, err := streak.ParseDate(at)
		if err != nil {
			fe.Add("at", "must be a date YYYY-MM-DD")
		}
		day = d.Time()
	}
	checkLimit(&fe, limit)
	if err := fe.Err(op); err != nil {
		return nil, err
	}
	if _, err := caller(ctx, op); err != nil {
		return nil, err
	}
	pk := authorBoardPK(period, periodKey(period, day))
	now := a.clock.Now()
	ckey := fmt.Sprintf("%s:%d", pk, limit)
	if v, ok := a.boards.get(ckey, now, a.eng.BoardCache); ok {
		return withoutGone(ctx, a, v.([]AuthorRank), func(r AuthorRank) string { return r.UserID })
	}
	p, err := a.table.Query(ctx, withLimit(authorBoardQuery(pk), limit))
	if err != nil {
		return nil, err
	}
	out := make([]AuthorRank, 0, len(p.Items))
	for _, it := range p.Items {
		out = append(out, AuthorRank{UserID: it.String("author_id"), Score: it.Int("score"), Posts: it.Int("posts"), LikesReceived: it.Int("likes")})
	}
	a.boards.put(ckey, now, out)
	return withoutGone(ctx, a, out, func(r AuthorRank) string { return r.UserID })
}

// scoreWrites returns the writes that add posts and likes to author's scores in the day, week and
// month of t: each a read-modify-write of the score item checked by its version, so that the
// index key can hold the new score. A transaction that fails on one of them is retried from a new
// read. The items are read from the scores kept (keptScores) if all three are, else from the table.
// After the transaction, the caller calls done with its error: the new scores are kept if it
// committed; after a failure the next read is from the table.
func (a *App) scoreWrites(ctx context.Context, author string, t time.Time, posts, likes int64) (writes []table.Write, done func(error), err error) {
	keys := make([]table.Key, len(Periods), len(Periods)+1)
	for i, p := range Periods {
		keys[i] = scoreKey(author, p, periodKey(p, t))
	}
	cur, kept := a.scores.get(keys)
	gone := false
	if kept {
		g, err := a.goneUsers(ctx, author)
		if err != nil {
			return nil, nil, err
		}
		gone = g[author]
	} else {
		items, err := a.table.BatchGet(ctx, append(keys, userKey(author)))
		if err != nil {
			return nil, nil, err
		}
		gone = userGone(items[len(Periods)])
		cur = make([]keptScore, len(Periods))
		for i, it := range items[:len(Periods)] {
			cur[i] = keptScore{posts: it.Int("posts"), likes: it.Int("likes"), version: it.Int("version")}
		}
	}
	if gone {
		return nil, func(error) {}, nil // erased with the account: a late score would only make it again
	}
	writes = make([]table.Write, len(Periods))
	next := make([]keptScore, len(Periods))
	for i, p := range Periods {
		n, l := cur[i].posts+posts, cur[i].likes+likes
		next[i] = keptScore{posts: n, likes: l, version: cur[i].version + 1}
		score := n*a.eng.PostWeight + l*a.eng.LikeWeight
		it := table.Item{table.PK: keys[i].PK, table.SK: keys[i].SK, "author_id": author, "period": p,
			"posts": n, "likes": l, "score": score, "version": next[i].version}
		if score > 0 {
			setIndex(it, gsi2, authorBoardPK(p, periodKey(p, t)), fmt.Sprintf("%012d#%s", score, author))
		}
		writes[i] = table.PutWrite(it, table.VersionIs("version", cur[i].version))
	}
	return writes, func(err error) {
		if err == nil {
			a.scores.keep(keys, next)
		} else {
			a.scores.drop(keys)
		}
	}, nil
}

// keptScore is what a score item holds that an addition to it needs.
type keptScore struct{ posts, likes, version int64 }

// keptScores keeps the score items a process committed, in a process that is its table's only
// writer (nil otherwise), so that adding to a score reads no item. A kept score is only what the
// item most likely holds: every score write is conditioned on the version it was built from, so a
// kept score that is not the item's (an erasure deleted the item, or a concurrent addition's keep
// came late) fails the transaction, which drops it, and the retry reads the table.
type keptScores struct {
	mu sync.Mutex
	m  map[table.Key]keptScore
}

// keptScoresMax bounds the scores kept (~100 bytes each): three for each author active lately.
const keptScoresMax = 200_000

func keptScoresOf(d Deps) *keptScores {
	if !d.SoleWriter {
		return nil
	}
	return &keptScores{m: map[table.Key]keptScore{}}
}

// get returns the scores of keys if all are kept.
func (k *keptScores) get(keys []table.Key) ([]keptScore, bool) {
	if k == nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]keptScore, len(keys))
	for i, key := range keys {
		s, ok := k.m[key]
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// keep keeps scores committed to keys, each unless a later version is kept.
func (k *keptScores) keep(keys []table.Key, scores []keptScore) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m)+len(keys) > keptScoresMax {
		clear(k.m) // as the other caches of the process: simple, and refilled by the next scores
	}
	for i, key := range keys {
		if s, ok := k.m[key]; !ok || s.version < scores[i].version {
			k.m[key] = scores[i]
		}
	}
}

func (k *keptScores) drop(keys []table.Key) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		delete(k.m, key)
	}
}

// ApplyLeaderboards is the leaderboards consumer's handler: PostCreated scores a post for its
// author, LikeCreated a like received, LikeDeleted takes a counted like back, and PostDeleted takes
// the post and every like it had counted back. It is idempotent: each event's applied record
// commits with its effects. Other events are ignored.
func (a *App) ApplyLeaderboards(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyLeaderboards"
	applied := appliedKey(LeaderboardsGroup, ev.ID)
	record := a.appliedRecord(ctx, LeaderboardsGroup, ev.ID)
	switch ev.Type {
	case PostCreated:
		p, err := a.postPayload(ev)
		if err != nil || p.PostID == "" || p.AuthorID == "" {
			return rookery.E(op, rookery.Invalid, "malformed post event", err)
		}
		// The post's board item is the event's applied record: it is created with the post's score
		// and never removed (a deletion marks it), so a redelivery, or a PostCreated after the
		// post's PostDeleted, finds it and scores nothing.
		post := boardPostKey(p.PostID)
		counted := putNew(ctx, table.Item{table.PK: post.PK, table.SK: post.SK, "author_id": p.AuthorID, "created_at": p.CreatedAt.UnixMilli()})
		return a.scoreTx(ctx, counted, func() ([]table.Write, error) { return nil, nil }, p.AuthorID, p.CreatedAt.Time, 1, 0)
	case LikeCreated, LikeDeleted:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.PostID == "" || p.AuthorID == "" || p.UserID == "" {
			return rookery.E(op, rookery.Invalid, "malformed like event", err)
		}
		alive := table.CheckWrite(boardPostKey(p.PostID), table.NotExists("deleted"))
		like := boardLikeKey(p.PostID, p.UserID)
		if ev.Type == LikeCreated {
			day := streak.DateOf(p.At.Time, time.UTC)
			err := a.scoreTx(ctx, record, func() ([]table.Write, error) {
				return []table.Write{alive,
					table.PutWrite(table.Item{table.PK: like.PK, table.SK: like.SK, "at": p.At.UnixMilli()}, table.NotExists(table.PK)),
					table.UpdateWrite(boardTallyKey(p.PostID, day), table.Update{Add: map[string]int64{"count": 1}}),
				}, nil
			}, p.AuthorID, p.At.Time, 0, 1)
			if errors.Is(err, errChanged) { // counted before
				return a.onlyApplied(ctx, record)
			}
			return err
		}
		for {
			it, err := a.table.Get(ctx, like)
			if rookery.IsKind(err, rookery.NotFound) {
				return a.onlyApplied(ctx, record) // never counted, or taken back with its post
			}
			if err != nil {
				return err
			}
			at := time.UnixMilli(it.Int("at")).UTC()
			err = a.scoreTx(ctx, record, func() ([]table.Write, error) {
				return []table.Write{alive,
					table.DeleteWrite(like, table.Exists(table.PK)),
					table.UpdateWrite(boardTallyKey(p.PostID, streak.DateOf(at, time.UTC)), table.Update{Add: map[string]int64{"count": -1}}),
				}, nil
			}, p.AuthorID, at, 0, -1)
			if !errors.Is(err, errChanged) {
				return err
			}
		}
	case PostDeleted:
		p, err := a.postPayload(ev)
		if err != nil || p.PostID == "" || p.AuthorID == "" {
			return rookery.E(op, rookery.Invalid, "malformed post event", err)
		}
		if _, err := a.table.Get(ctx, applied); err == nil {
			return nil
		}
		if err := a.unscorePost(ctx, p.PostID, p.AuthorID); err != nil {
			return err
		}
		return a.onlyApplied(ctx, record)
	}
	return nil
}

// errChanged says that the items a leaderboard write was built on changed: read them again.
var errChanged = errors.New("changed")

// scoreTx commits record (the event's applied record), the writes of build (the first of which
// may fail its condition: then only record is written, the event changes nothing) and posts/likes
// added to author's scores at t, retrying on concurrent score changes. It returns errChanged when
// a write of build other than the first failed its condition.
func (a *App) scoreTx(ctx context.Context, record table.Write, build func() ([]table.Write, error), author string, t time.Time, posts, likes int64) error {
	for attempt := 0; ; attempt++ {
		w, err := build()
		if err != nil {
			return err
		}
		scores, done, err := a.scoreWrites(ctx, author, t, posts, likes)
		if err != nil {
			return err
		}
		err = a.table.TransactWrite(ctx, slices.Concat([]table.Write{record}, w, scores))
		done(err)
		var ce *table.ConditionError
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &ce):
			return err
		case ce.Index == 0:
			return nil // applied before
		case ce.Index == 1 && len(w) > 0:
			return a.onlyApplied(ctx, record)
		case ce.Index <= len(w):
			return errChanged
		case attempt > 1000:
			return rookery.E("app.scoreTx", rookery.Unavailable, "scores keep changing", err)
		}
	}
}

// onlyApplied records that an event was applied without effects.
func (a *App) onlyApplied(ctx context.Context, record table.Write) error {
	err := a.table.TransactWrite(ctx, []table.Write{record})
	var ce *table.ConditionError
	if errors.As(err, &ce) {
		return nil
	}
	return err
}

// unscorePost takes a deleted post and the likes it had counted back from its author's scores. It
// may run again after a crash: each step is a transaction that finds its work done.
func (a *App) unscorePost(ctx context.Context, post, author string) error {
	k := boardPostKey(post)
	// Step 1: mark the post deleted (likes and unlikes of it change nothing from now on) and take
	// the post back, if it was counted.
	for {
		it, err := a.table.Get(ctx, k)
		if rookery.IsKind(err, rookery.NotFound) {
			_, err = a.table.Update(ctx, k, table.Update{Set: map[string]any{"deleted": true, "author_id": author}})
			if err != nil {
				return err
			}
			break
		}
		if err != nil {
			return err
		}
		if it.Bool("deleted") {
			break
		}
		mark := table.UpdateWrite(k, table.Update{Set: map[string]any{"deleted": true}}, table.NotExists("deleted"))
		scores, done, err := a.scoreWrites(ctx, author, time.UnixMilli(it.Int("created_at")), -1, 0)
		if err != nil {
			return err
		}
		err = a.table.TransactWrite(ctx, append([]table.Write{mark}, scores...))
		done(err)
		var ce *table.ConditionError
		if err == nil {
			break
		}
		if !errors.As(err, &ce) {
			return err
		}
	}
	// Step 2: take back each day's likes with the deletion of that day's tally.
	var tallies []table.Item
	if err := table.EachPage(ctx, a.table, boardTalliesQuery(post), func(items []table.Item) error {
		tallies = append(tallies, items...)
		return nil
	}); err != nil {
		return err
	}
	for _, tally := range tallies {
		day, err := dayOfTally(tally.String(table.SK))
		if err != nil {
			return rookery.E("app.unscorePost", rookery.Internal, err)
		}
		for {
			n := tally.Int("count")
			scores, done, err := a.scoreWrites(ctx, author, day.Time(), 0, -n)
			if err != nil {
				return err
			}
			err = a.table.TransactWrite(ctx, append([]table.Write{table.DeleteWrite(tally.Key(), table.Compare("count", table.OpEq, n))}, scores...))
			done(err)
			var ce *table.ConditionError
			if err == nil {
				break
			}
			if !errors.As(err, &ce) {
				return err
			}
			if ce.Index == 0 { // taken back before (a rerun): nothing left to do for this day
				if tally, err = a.table.Get(ctx, tally.Key()); rookery.IsKind(err, rookery.NotFound) {
					break
				} else if err != nil {
					return err
				}
			}
		}
	}
	// Step 3: forget the likes (no longer needed: the post's likes change nothing now).
	var likes []table.Write
	if err := table.EachPage(ctx, a.table, boardLikesQuery(post), func(items []table.Item) error {
		for _, it := range items {
			likes = append(likes, table.DeleteWrite(it.Key()))
		}
		return nil
	}); err != nil {
		return err
	}
	for chunk := range slices.Chunk(likes, table.MaxTransact) {
		if err := a.table.TransactWrite(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

// withoutGone returns ranks without deleted users' (one batch read): a board is cached, and the
// erasure takes a while, but a deleted user leaves every board at once.
func withoutGone[T any](ctx context.Context, a *App, ranks []T, user func(T) string) ([]T, error) {
	ids := make([]string, len(ranks))
	for i, r := range ranks {
		ids[i] = user(r)
	}
	gone, err := a.goneUsers(ctx, ids...)
	if err != nil || len(gone) == 0 {
		return ranks, err
	}
	return slices.DeleteFunc(slices.Clone(ranks), func(r T) bool { return gone[user(r)] }), nil
}
