package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// Activities, points and daily streaks (seed 001; API.md "Activity, streaks, points,
// leaderboards"). The rules of a streak are package streak's; this file stores them:
//
//   - An activity is recorded in one transaction: the claim of its idempotency key (a conditional
//     put: a duplicate key counts nothing twice; an event's activity has no claim: its record's key
//     is the event's, and the record's own conditional put is the claim), the activity record
//     (expires after 90 days), the
//     user's daily total for the local date (kept forever), the user's streak record (optimistic
//     locking: a version checked by the write, retried on conflict) and the ActivityRecorded event.
//   - The streak record is cached write-through (Redis when configured): after the transaction
//     commits, the new version replaces the cached one, so a user sees their new streak at once.
//   - Posts, comments and likes made through the API count as activities: a consumer records them
//     with the event id as the idempotency key.

// ActivityRecorded is the event of an activity.
const ActivityRecorded = "ActivityRecorded"

// ActivityPayload is the payload of ActivityRecorded, version 1.
type ActivityPayload struct {
	UserID     string       `json:"user_id"`
	ActivityID string       `json:"activity_id"`
	Type       string       `json:"type"`
	Source     string       `json:"source,omitempty"`
	Points     int64        `json:"points"`
	Date       string       `json:"date"` // the local date it counted on
	Counts     bool         `json:"counts_toward_streak"`
	OccurredAt rookery.Time `json:"occurred_at"`
	// StreakBefore and StreakAfter are the user's current streak before and after it (a
	// streak.changed webhook names the milestones it passed).
	StreakBefore int `json:"streak_before"`
	StreakAfter  int `json:"streak_after"`
}

// DefaultActivityPoints are the activity types and their points when none are configured.
var DefaultActivityPoints = map[string]int64{"daily_open": 10, "post": 5, "comment": 3, "like": 1}

// Engagement configures activities, streaks and leaderboards; the zero value is the defaults.
type Engagement struct {
	// Points maps each activity type to its points; nil means DefaultActivityPoints.
	Points map[string]int64
	// Cache keeps streak records write-through; nil means an in-process cache.
	Cache cache.Cache
	// Limiter counts activity writes per user; nil means in-process counters.
	Limiter cache.Limiter
	// RateLimit activity writes per user per RatePer; 0 means 120 per minute.
	RateLimit int
	RatePer   time.Duration
	// PostWeight and LikeWeight make an author's leaderboard score; 0 means 10 and 1.
	PostWeight, LikeWeight int64
	// StreakShards is the number of partitions of the streak leaderboard; 0 means 16.
	StreakShards int
	// BoardCache is how long leaderboard reads are cached in process; 0 means not at all.
	BoardCache time.Duration
}

func (e Engagement) withDefaults(clock rookery.Clock) Engagement {
	if e.Points == nil {
		e.Points = DefaultActivityPoints
	}
	if e.Cache == nil || e.Limiter == nil {
		m := cache.NewMemory(clock, 0)
		if e.Cache == nil {
			e.Cache = m
		}
		if e.Limiter == nil {
			e.Limiter = m
		}
	}
	if e.RateLimit <= 0 {
		e.RateLimit = 120
	}
	if e.RatePer <= 0 {
		e.RatePer = time.Minute
	}
	if e.PostWeight <= 0 {
		e.PostWeight = 10
	}
	if e.LikeWeight <= 0 {
		e.LikeWeight = 1
	}
	if e.StreakShards <= 0 {
		e.StreakShards = 16
	}
	return e
}

const (
	activityTTL    = 90 * 24 * time.Hour // activity records and their idempotency claims
	streakCacheTTL = 5 * time.Minute     // seed 001: streak:{user_id}, 5 min, write-through
)

// ActivityInput is the body of POST /v1/activities.
type ActivityInput struct {
	Type           string        `json:"type"`
	IdempotencyKey string        `json:"idempotency_key"`
	OccurredAt     *rookery.Time `json:"occurred_at"`
	Source         string        `json:"source"`
}

// ActivityResult is the reply to POST /v1/activities.
type ActivityResult struct {
	PointsAwarded int64  `json:"points_awarded"`
	Duplicate     bool   `json:"duplicate"`
	Streak        Streak `json:"streak"`
}

// Streak is a user's streak as the API shows it, read on the current day in their time zone.
type Streak struct {
	CurrentStreak    int    `json:"current_streak"`
	LongestStreak    int    `json:"longest_streak"`
	LastActivityDate string `json:"last_activity_date"`
	TimeZone         string `json:"timezone"`
	TotalPoints      int64  `json:"total_points"`
	// Freezes held (after paying for the days missed since the last activity).
	Freezes int `json:"freezes"`
	// Counting is false while the user's time zone changes keep activity from counting toward
	// the streak (streak.Counts).
	Counting bool `json:"counting"`
}

// streakRecord is a user's stored streak: the state of package streak, the time zone and its
// recent changes, the total points, and the version that optimistic locking checks.
type streakRecord struct {
	User    string              `json:"user"`
	State   streak.State        `json:"state"`
	Zone    string              `json:"zone"`
	Changes []streak.ZoneChange `json:"changes,omitempty"`
	Points  int64               `json:"points"`
	Version int64               `json:"version"`
}

func (r streakRecord) item(shards int) table.Item {
	k := streakKey(r.User)
	state, _ := json.Marshal(r)
	sum := r.State.Summary()
	it := table.Item{table.PK: k.PK, table.SK: k.SK, "user_id": r.User, "record": string(state), "version": r.Version}
	if sum.Current > 0 {
		pk, sk := streakBoardKeys(r.User, sum.Current, shards)
		setIndex(it, gsi2, pk, sk)
	}
	return it
}

func streakFromItem(it table.Item) (streakRecord, error) {
	var r streakRecord
	err := json.Unmarshal([]byte(it.String("record")), &r)
	return r, err
}

func (r streakRecord) location() *time.Location { return locationOf(r.Zone) }

// locationOf loads an IANA zone; zones are validated when stored, so a failure means UTC.
func locationOf(zone string) *time.Location {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// view returns the record as the API shows it at time now.
func (r streakRecord) view(now time.Time) Streak {
	sum := r.State.Summary()
	cur, freezes := sum.CurrentOn(streak.DateOf(now, r.location()), r.State.Excused)
	s := Streak{CurrentStreak: cur, LongestStreak: sum.Longest, TimeZone: r.Zone, TotalPoints: r.Points,
		Freezes: freezes, Counting: streak.Counts(now, r.Changes)}
	if sum.Current > 0 {
		s.LastActivityDate = sum.Last.String()
	}
	return s
}

// loadStreak returns user's streak record: from the cache when fromCache, else (or on a miss) from
// the table. A user without one gets a new record (version 0) in their time zone; a user who does
// not exist is NotFound.
func (a *App) loadStreak(ctx context.Context, op rookery.Op, user string, fromCache bool) (streakRecord, error) {
	if fromCache {
		if b, ok, err := a.eng.Cache.Get(ctx, streakCacheKey(user)); err == nil && ok {
			var r streakRecord
			if json.Unmarshal(b, &r) == nil {
				return r, nil
			}
		}
	}
	it, err := a.table.Get(ctx, streakKey(user))
	if err == nil {
		r, err := streakFromItem(it)
		if err != nil {
			return r, rookery.E(op, rookery.Internal, "corrupt streak record", err)
		}
		a.cacheStreak(ctx, r)
		return r, nil
	}
	if !rookery.IsKind(err, rookery.NotFound) {
		return streakRecord{}, err
	}
	u, err := a.table.Get(ctx, userKey(user))
	if rookery.IsKind(err, rookery.NotFound) {
		return streakRecord{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	if err != nil {
		return streakRecord{}, err
	}
	return streakRecord{User: user, Zone: u.String("timezone")}, nil
}

// cacheStreak writes r through to the cache; a cache that fails only costs a later table read.
func (a *App) cacheStreak(ctx context.Context, r streakRecord) {
	if b, err := json.Marshal(r); err == nil {
		_ = a.eng.Cache.Set(ctx, streakCacheKey(r.User), r.Version, b, streakCacheTTL)
	}
}

// activity is one activity to record.
type activity struct {
	user, typ, key, source string
	at                     time.Time
	// event is the id of the event an activity was derived from (posts, comments and likes made
	// through the API), "" for an activity the client recorded. It is the activity's id, so its
	// record's key is the same on every delivery of the event.
	event string
}

// RecordActivity records an activity of the acting user (API.md POST /v1/activities). The type
// must be configured; occurred_at (default now) may lie up to 48 hours in the past and 5 minutes
// in the future. The same idempotency key again returns the first result with Duplicate set and
// counts nothing. Writes are rate limited per user (RateLimited, with the time to wait).
func (a *App) RecordActivity(ctx context.Context, in ActivityInput) (ActivityResult, error) {
	const op rookery.Op = "app.RecordActivity"
	user, err := actingUser(ctx, op)
	if err != nil {
		return ActivityResult{}, err
	}
	now := a.clock.Now().UTC()
	var fe rookery.FieldErrors
	if _, ok := a.eng.Points[in.Type]; !ok {
		fe.Add("type", "is not a configured activity type")
	}
	if !ValidIdempotencyKey(in.IdempotencyKey) {
		fe.Add("idempotency_key", "must be 1 to 128 printable ASCII characters")
	}
	if in.Source != "" && !idOf(in.Source, 32, "_-.") {
		fe.Add("source", "must be 1 to 32 characters of A-Z, a-z, 0-9, _, - and .")
	}
	at := now
	if in.OccurredAt != nil {
		at = in.OccurredAt.UTC()
		switch {
		case at.Before(now.Add(-streak.LateBy)):
			fe.Add("occurred_at", "must be at most 48 hours ago")
		case at.After(now.Add(streak.EarlyBy)):
			fe.Add("occurred_at", "must not be more than 5 minutes in the future")
		}
	}
	if err := fe.Err(op); err != nil {
		return ActivityResult{}, err
	}
	ok, after, err := a.eng.Limiter.Allow(ctx, "activities:"+user, a.eng.RateLimit, a.eng.RatePer)
	if err != nil {
		return ActivityResult{}, err
	}
	if !ok {
		return ActivityResult{}, rookery.RetryAfter(rookery.E(op, rookery.RateLimited, "too many activities; retry later"), after)
	}
	if err := a.notGone(ctx, op, user); err != nil {
		return ActivityResult{}, err
	}
	return a.record(ctx, op, activity{user: user, typ: in.Type, key: in.IdempotencyKey, source: in.Source, at: at.Truncate(time.Millisecond)})
}

// maxStreakAttempts bounds the retries of one activity against concurrent writers of the same
// streak record; each attempt loses only to a writer that succeeded.
const maxStreakAttempts = 200

// record records act and returns the result. It is the one writer of streak records besides
// time-zone changes (PutUser) and repair.
func (a *App) record(ctx context.Context, op rookery.Op, act activity) (ActivityResult, error) {
	// Activities of one user in this process take turns; optimistic locking settles races with
	// other processes (and with zone changes and repair). Without the turns, 64 concurrent writers
	// of one record mostly fail their version checks and the unlucky ones run out of attempts.
	defer a.streakLocks.Lock(act.user)()
	points := a.eng.Points[act.typ]
	for attempt := 0; attempt < maxStreakAttempts; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(min(attempt, 20)) * int64(200*time.Microsecond))))
		}
		rec, err := a.loadStreak(ctx, op, act.user, attempt == 0)
		if err != nil {
			return ActivityResult{}, err
		}
		now := a.clock.Now().UTC()
		day := streak.DateOf(act.at, locationOf(streak.ZoneAt(act.at, rec.Zone, rec.Changes)))
		// An activity counts toward the streak unless zone changes forbid it, or it is for a day the
		// streak has settled (only a consumer far behind can be that late); the daily record says
		// the same, so that recomputing from daily records (repair) agrees.
		counts := streak.Counts(act.at, rec.Changes) && !rec.State.Settles(day)
		old := rec.Version
		before := rec.view(now).CurrentStreak
		if counts {
			rec.State.Add(day)
		}
		rec.State.Settle(streak.DateOf(now, rec.location()) - streak.SettleLag)
		rec.Changes = streak.KeepChanges(rec.Changes, now)
		rec.Points += points
		rec.Version++

		id := act.event
		if id == "" {
			id = a.ids()
		}
		ev, err := a.event(ctx, ActivityRecorded, "activities:"+act.user, ActivityPayload{UserID: act.user, ActivityID: id, Type: act.typ,
			Source: act.source, Points: points, Date: day.String(), Counts: counts, OccurredAt: rookery.Time{Time: act.at},
			StreakBefore: before, StreakAfter: rec.view(now).CurrentStreak}, now)
		if err != nil {
			return ActivityResult{}, rookery.E(op, rookery.Internal, err)
		}
		expires := now.Add(activityTTL).Unix()
		daily := table.Update{Add: map[string]int64{"points": points, "events": 1}, Set: map[string]any{"user_id": act.user, "date": day.String()}}
		if counts {
			daily.Set["streak_day"] = true
		}
		item := activityItem(act.user, id, act.typ, act.source, points, act.at, expires)
		var writes []table.Write
		if act.event == "" {
			writes = append(writes, activityClaim(act.user, act.key, id, points, expires), table.ImmutablePutWrite(item))
		} else {
			if !events.IsFirstDelivery(ctx) {
				// A redelivery also claims the key "event:<id>", which an earlier version claimed
				// instead of writing the record under the event's id, so that an event it handled
				// counts once after an upgrade.
				writes = append(writes, activityClaim(act.user, "event:"+act.event, id, points, expires))
			}
			// An event's activity record has the same key on every delivery, so the record is the
			// claim (putNew: on the first delivery it reads nothing; a read of a key the store does
			// not hold was the costliest of the four).
			writes = append(writes, putNew(ctx, item))
		}
		// A condition failing among these writes means a duplicate.
		claims := len(writes)
		writes = append(writes,
			table.UpdateWrite(dailyKey(act.user, day), daily),
			table.PutWrite(rec.item(a.eng.StreakShards), table.VersionIs("version", old)))
		err = a.writeWithEvent(ctx, writes, ev)
		var ce *table.ConditionError
		switch {
		case err == nil:
			a.cacheStreak(ctx, rec)
			return ActivityResult{PointsAwarded: points, Streak: rec.view(now)}, nil
		case errors.As(err, &ce) && ce.Index < claims:
			return a.duplicate(ctx, op, act.user)
		case errors.As(err, &ce):
			continue // the streak record changed under us: read it again from the table
		default:
			return ActivityResult{}, err
		}
	}
	return ActivityResult{}, rookery.E(op, rookery.Unavailable, "the streak is being changed by many writers; retry")
}

// activityClaim is the conditional put that claims an activity's idempotency key for user.
func activityClaim(user, key, id string, points, expires int64) table.Write {
	sum := sha256.Sum256([]byte(key))
	k := activityClaimKey(user, hex.EncodeToString(sum[:]))
	return table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "activity_id": id, "points": points, table.TTL: expires}, table.NotExists(table.PK))
}

// duplicate is the reply to an activity whose key was recorded before: nothing is awarded by it
// (points_awarded 0; the points the first one earned are in the streak's total).
func (a *App) duplicate(ctx context.Context, op rookery.Op, user string) (ActivityResult, error) {
	rec, err := a.loadStreak(ctx, op, user, true)
	if err != nil {
		return ActivityResult{}, err
	}
	return ActivityResult{PointsAwarded: 0, Duplicate: true, Streak: rec.view(a.clock.Now())}, nil
}

// UserStreak returns user's streak, read on today in their time zone. Any authenticated caller may
// read it (it is on the leaderboard).
func (a *App) UserStreak(ctx context.Context, user string) (Streak, error) {
	const op rookery.Op = "app.UserStreak"
	if err := validID(op, user); err != nil {
		return Streak{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return Streak{}, err
	}
	if err := a.notGone(ctx, op, user); err != nil {
		return Streak{}, err
	}
	rec, err := a.loadStreak(ctx, op, user, true)
	if err != nil {
		return Streak{}, err
	}
	return rec.view(a.clock.Now()), nil
}

// DayPoints is one local day of a user's points history.
type DayPoints struct {
	Date   string `json:"date"`
	Points int64  `json:"points"`
	Events int64  `json:"events"`
}

// Points returns user's daily totals of the last days local days (today included), newest first;
// days without activity are left out. Only the user or a server token may read them.
func (a *App) Points(ctx context.Context, user string, days int) ([]DayPoints, error) {
	const op rookery.Op = "app.Points"
	var fe rookery.FieldErrors
	if !rookery.ValidUserID(user) {
		fe.Add("id", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	if days < 1 || days > 90 {
		fe.Add("days", "must be 1 to 90")
	}
	if err := fe.Err(op); err != nil {
		return nil, err
	}
	if err := actAs(ctx, op, user); err != nil {
		return nil, err
	}
	if err := a.notGone(ctx, op, user); err != nil {
		return nil, err
	}
	rec, err := a.loadStreak(ctx, op, user, true)
	if err != nil {
		return nil, err
	}
	today := streak.DateOf(a.clock.Now(), rec.location())
	from, to := dailyKey(user, today-streak.Date(days-1)), dailyKey(user, today)
	out := []DayPoints{}
	err = table.EachPage(ctx, a.table, table.Query{PK: from.PK, SK: table.SKCond{Op: table.SKBetween, Value: from.SK, Value2: to.SK}, Desc: true, Limit: days}, func(items []table.Item) error {
		for _, it := range items {
			out = append(out, DayPoints{Date: it.String("date"), Points: it.Int("points"), Events: it.Int("events")})
		}
		return nil
	})
	return out, err
}

// ActivitiesGroup is the consumer group that counts posts, comments and likes made through the API
// as activities.
const ActivitiesGroup = "activities"

// ApplyActivities records PostCreated as a "post" activity of its author, CommentCreated as a
// "comment" of its author and LikeCreated as a "like" of the liker, at the time of the event, with
// the event id as idempotency key (so a redelivered event counts once). Types that are not
// configured, and users that do not exist, are skipped; other events are ignored.
func (a *App) ApplyActivities(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyActivities"
	var act activity
	switch ev.Type {
	case PostCreated:
		p, err := a.postPayload(ev)
		if err != nil {
			return rookery.E(op, rookery.Invalid, "malformed event", err)
		}
		act = activity{user: p.AuthorID, typ: "post", at: p.CreatedAt.Time}
	case CommentCreated:
		var p CommentPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, "malformed event", err)
		}
		act = activity{user: p.AuthorID, typ: "comment", at: p.At.Time}
	case LikeCreated:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return rookery.E(op, rookery.Invalid, "malformed event", err)
		}
		act = activity{user: p.UserID, typ: "like", at: p.At.Time}
	default:
		return nil
	}
	if _, ok := a.eng.Points[act.typ]; !ok || !rookery.ValidUserID(act.user) {
		return nil
	}
	act.event, act.source = ev.ID, "api"
	_, err := a.record(ctx, op, act)
	if rookery.IsKind(err, rookery.NotFound) {
		return nil
	}
	return err
}
