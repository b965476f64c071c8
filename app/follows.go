package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// Event types of the follow graph.
const (
	FollowCreated = "FollowCreated"
	FollowDeleted = "FollowDeleted"
)

// FollowPayload is the payload of FollowCreated and FollowDeleted, version 1.
type FollowPayload struct {
	FollowerID string       `json:"follower_id"`
	FolloweeID string       `json:"followee_id"`
	At         rookery.Time `json:"at"`
}

// Follow is one edge of the follow graph, as the API shows it.
type Follow struct {
	UserID     string       `json:"user_id"`
	FollowedAt rookery.Time `json:"followed_at"`
}

// Page is one page of a list with its opaque cursor ("" on the last page).
type Page[T any] struct {
	Items []T
	Next  string
}

// event returns a new event of type typ keyed by key with payload p.
func (a *App) event(typ, key string, p any, at time.Time) (rookery.Event, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return rookery.Event{}, err
	}
	return rookery.Event{ID: a.ids(), Type: typ, Version: 1, Key: key, OccurredAt: rookery.Time{Time: at}, Payload: b}, nil
}

// writeWithEvent commits writes and the outbox items of evs in one transaction, then wakes the
// relay. Condition errors name the index in writes.
func (a *App) writeWithEvent(ctx context.Context, writes []table.Write, evs ...rookery.Event) error {
	for _, ev := range evs {
		ow, err := a.outbox.Write(ev)
		if err != nil {
			return err
		}
		writes = append(writes, ow)
	}
	if err := a.table.TransactWrite(ctx, writes); err != nil {
		return err
	}
	a.outbox.Notify()
	return nil
}

func followEdgeKey(follower, followee string) string { return "follow:" + follower + ":" + followee }

// Follow makes id follow target and returns when it started. Following again changes nothing and
// returns the first time (the counts move once). Only id itself, or a server token, may; following
// yourself is Invalid; an unknown id or target is NotFound.
func (a *App) Follow(ctx context.Context, id, target string) (rookery.Time, error) {
	const op rookery.Op = "app.Follow"
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return rookery.Time{}, err
	}
	got, err := a.table.BatchGet(ctx, []table.Key{userKey(id), userKey(target), blockKey(target, id), blockKey(id, target)})
	if err != nil {
		return rookery.Time{}, err
	}
	if got[0] == nil || got[1] == nil {
		return rookery.Time{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	if got[2] != nil || got[3] != nil {
		return rookery.Time{}, rookery.E(op, rookery.Forbidden, "a block stands between these users")
	}
	// A few attempts: between a follow that finds the edge already there and the read of when it
	// was made, a concurrent unfollow may remove it; then the follow is made again.
	for attempt := 0; attempt < 5; attempt++ {
		now := a.clock.Now().UTC().Truncate(time.Millisecond)
		ev, err := a.event(FollowCreated, followEdgeKey(id, target), FollowPayload{FollowerID: id, FolloweeID: target, At: rookery.Time{Time: now}}, now)
		if err != nil {
			return rookery.Time{}, rookery.E(op, rookery.Internal, err)
		}
		err = a.writeWithEvent(ctx, []table.Write{table.PutWrite(followItem(id, target, now), table.NotExists(table.PK))}, ev)
		var ce *table.ConditionError
		if err == nil {
			return rookery.Time{Time: now}, nil
		}
		if !errors.As(err, &ce) || ce.Index != 0 {
			return rookery.Time{}, err
		}
		edge, gerr := a.table.Get(ctx, followKey(id, target)) // already following
		if gerr == nil {
			return rookery.Time{Time: time.UnixMilli(edge.Int("followed_at")).UTC()}, nil
		}
		if !rookery.IsKind(gerr, rookery.NotFound) {
			return rookery.Time{}, gerr
		}
	}
	return rookery.Time{}, rookery.E(op, rookery.Conflict, "the follow is being changed concurrently; retry")
}

// Unfollow makes id stop following target; it succeeds also when id did not follow target.
func (a *App) Unfollow(ctx context.Context, id, target string) error {
	const op rookery.Op = "app.Unfollow"
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return err
	}
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(FollowDeleted, followEdgeKey(id, target), FollowPayload{FollowerID: id, FolloweeID: target, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, []table.Write{table.DeleteWrite(followKey(id, target), table.Exists(table.PK))}, ev)
	var ce *table.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return nil // not following: nothing to do, and no event
	}
	return err
}

func (a *App) checkEdge(ctx context.Context, op rookery.Op, id, target string) error {
	var fe rookery.FieldErrors
	if !rookery.ValidUserID(id) {
		fe.Add("id", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	if !rookery.ValidUserID(target) {
		fe.Add("target", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	if err := fe.Err(op); err != nil {
		return err
	}
	if err := actAs(ctx, op, id); err != nil {
		return err
	}
	if id == target {
		return rookery.FieldErrors{{Name: "target", Reason: "must be another user than yourself"}}.Err(op)
	}
	return nil
}

// FollowedAt returns when id started following target, or NotFound if id does not follow target.
func (a *App) FollowedAt(ctx context.Context, id, target string) (rookery.Time, error) {
	const op rookery.Op = "app.FollowedAt"
	if !rookery.ValidUserID(id) || !rookery.ValidUserID(target) {
		return rookery.Time{}, rookery.FieldErrors{{Name: "id", Reason: "user ids are 1 to 64 characters of A-Z, a-z, 0-9, _ and -"}}.Err(op)
	}
	if _, err := caller(ctx, op); err != nil {
		return rookery.Time{}, err
	}
	edge, err := a.table.Get(ctx, followKey(id, target))
	if rookery.IsKind(err, rookery.NotFound) {
		return rookery.Time{}, rookery.E(op, rookery.NotFound, "not following")
	}
	if err != nil {
		return rookery.Time{}, err
	}
	return rookery.Time{Time: time.UnixMilli(edge.Int("followed_at")).UTC()}, nil
}

// Following lists whom id follows, newest first.
func (a *App) Following(ctx context.Context, id, cursor string, limit int) (Page[Follow], error) {
	return a.followList(ctx, "app.Following", "GSI1", followingPK(id), "followee_id", id, cursor, limit)
}

// Followers lists who follows id, newest first.
func (a *App) Followers(ctx context.Context, id, cursor string, limit int) (Page[Follow], error) {
	return a.followList(ctx, "app.Followers", "GSI3", followersPK(id), "follower_id", id, cursor, limit)
}

func (a *App) followList(ctx context.Context, op rookery.Op, index, pk, other, id, cursor string, limit int) (Page[Follow], error) {
	if err := checkList(op, id, limit); err != nil {
		return Page[Follow]{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return Page[Follow]{}, err
	}
	p, err := a.table.Query(ctx, table.Query{Index: index, PK: pk, Desc: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return Page[Follow]{}, err
	}
	out := Page[Follow]{Items: make([]Follow, 0, len(p.Items)), Next: p.Next}
	for _, it := range p.Items {
		out.Items = append(out.Items, Follow{UserID: it.String(other), FollowedAt: rookery.Time{Time: time.UnixMilli(it.Int("followed_at")).UTC()}})
	}
	return out, nil
}

// checkList validates a list request: the user id and a limit of 1..100.
func checkList(op rookery.Op, id string, limit int) error {
	var fe rookery.FieldErrors
	if !rookery.ValidUserID(id) {
		fe.Add("id", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	if limit < 1 || limit > 100 {
		fe.Add("limit", "must be 1 to 100")
	}
	return fe.Err(op)
}

// appliedTTL is how long a consumer remembers that it applied an event: far longer than any
// redelivery (the event log de-duplicates appends for 10 minutes to forever).
const appliedTTL = 7 * 24 * time.Hour

// CountersGroup is the consumer group that keeps follower and following counts.
const CountersGroup = "counters"

// ApplyCounts is the counters consumer's handler: FollowCreated adds one to the follower's
// following_count and the followee's follower_count, FollowDeleted takes one away; PostCreated and
// PostDeleted move the author's post_count, LikeCreated and LikeDeleted the post's like_count,
// CommentCreated and CommentDeleted its comment_count (those two batched: see hotCounters).
// A count of an item that no longer exists is skipped. It is
// idempotent: the increments and a record that the event was applied commit together, so a
// redelivered event changes nothing. Other event types are ignored.
func (a *App) ApplyCounts(ctx context.Context, ev rookery.Event) error {
	const op rookery.Op = "app.ApplyCounts"
	applied := appliedKey(CountersGroup, ev.ID)
	record := table.PutWrite(table.Item{table.PK: applied.PK, table.SK: applied.SK, table.TTL: a.clock.Now().Add(appliedTTL).Unix()}, table.NotExists(table.PK))
	var counts []table.Write
	add := func(user, attr string, delta int64) {
		counts = append(counts, table.UpdateWrite(userKey(user), table.Update{Add: map[string]int64{attr: delta}}, table.Exists(table.PK)))
	}
	switch ev.Type {
	case FollowCreated, FollowDeleted:
		var p FollowPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.FollowerID == "" || p.FolloweeID == "" {
			return rookery.E(op, rookery.Invalid, "malformed follow event", err)
		}
		delta := int64(1)
		if ev.Type == FollowDeleted {
			delta = -1
		}
		add(p.FollowerID, "following_count", delta)
		add(p.FolloweeID, "follower_count", delta)
	case LikeCreated, LikeDeleted:
		var p LikePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.PostID == "" {
			return rookery.E(op, rookery.Invalid, "malformed like event", err)
		}
		delta := int64(1)
		if ev.Type == LikeDeleted {
			delta = -1
		}
		return a.hot.add(ctx, postKey(p.PostID), record, "like_count", delta)
	case CommentCreated, CommentDeleted:
		var p CommentPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.PostID == "" {
			return rookery.E(op, rookery.Invalid, "malformed comment event", err)
		}
		delta := int64(1)
		if ev.Type == CommentDeleted {
			delta = -1
		}
		return a.hot.add(ctx, postKey(p.PostID), record, "comment_count", delta)
	case PostCreated, PostDeleted:
		var p PostPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.AuthorID == "" {
			return rookery.E(op, rookery.Invalid, "malformed post event", err)
		}
		delta := int64(1)
		if ev.Type == PostDeleted {
			delta = -1
		}
		add(p.AuthorID, "post_count", delta)
	default:
		return nil
	}
	// A count whose item is gone (a post deleted since) is dropped and the rest applied.
	for {
		err := a.table.TransactWrite(ctx, append([]table.Write{record}, counts...))
		var ce *table.ConditionError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Index == 0:
			return nil // applied before
		case errors.As(err, &ce):
			counts = append(counts[:ce.Index-1], counts[ce.Index:]...)
		default:
			return err
		}
	}
}

// Consumers returns the event consumers of the application, for the workers to run.
func (a *App) Consumers() []events.Consumer {
	cs := []events.Consumer{
		// Concurrency lets increments of one hot post meet in one batch (hotCounters).
		{Group: CountersGroup, Handle: a.ApplyCounts, Concurrency: 32},
		{Group: NotificationsGroup, Handle: a.ApplyNotifications},
	}
	if a.timelines != nil {
		cs = append(cs,
			events.Consumer{Group: FanoutGroup, Handle: a.ApplyFanout, Concurrency: 8},
			events.Consumer{Group: TimelineCleanupGroup, Handle: a.ApplyTimelineCleanup},
		)
	}
	return cs
}
