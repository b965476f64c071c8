package app

import (
	"context"
	"errors"
	"time"

	"github.com/rookery/rookery"
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
	if got[0] == nil || got[1] == nil || userGone(got[0]) || userGone(got[1]) {
		return rookery.Time{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	if got[2] != nil || got[3] != nil {
		return rookery.Time{}, rookery.E(op, rookery.Forbidden, "a block stands between these users")
	}
	defer a.followers.change(target)()
	defer a.edgeChange(id, target)()
	// A few attempts: between a follow that finds the edge already there and the read of when it
	// was made, a concurrent unfollow may remove it; then the follow is made again.
	for attempt := 0; attempt < 5; attempt++ {
		now := a.clock.Now().UTC().Truncate(time.Millisecond)
		ev, err := a.event(ctx, FollowCreated, followEdgeKey(id, target), FollowPayload{FollowerID: id, FolloweeID: target, At: rookery.Time{Time: now}}, now)
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

// Unfollow makes id stop following target; it succeeds also when id did not follow target. Both
// must be users (NotFound otherwise, as wherever a user is named).
func (a *App) Unfollow(ctx context.Context, id, target string) error {
	const op rookery.Op = "app.Unfollow"
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return err
	}
	if err := a.bothExist(ctx, op, id, target); err != nil {
		return err
	}
	return a.removeFollow(ctx, id, target)
}

// removeFollow ends follower's follow of followee, with its FollowDeleted event; when there is
// none it does nothing and succeeds.
func (a *App) removeFollow(ctx context.Context, follower, followee string) error {
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, FollowDeleted, followEdgeKey(follower, followee), FollowPayload{FollowerID: follower, FolloweeID: followee, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E("app.removeFollow", rookery.Internal, err)
	}
	defer a.followers.change(followee)()
	defer a.edgeChange(follower, followee)()
	err = a.writeWithEvent(ctx, []table.Write{table.DeleteWrite(followKey(follower, followee), table.Exists(table.PK))}, ev)
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

// bothExist returns NotFound unless id and target are both live users (see exists).
func (a *App) bothExist(ctx context.Context, op rookery.Op, id, target string) error {
	if err := a.exists(ctx, op, id); err != nil {
		return err
	}
	return a.exists(ctx, op, target)
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
	got, err := a.table.BatchGet(ctx, []table.Key{followKey(id, target), userKey(id), userKey(target)})
	if err != nil {
		return rookery.Time{}, err
	}
	if got[0] == nil || userGone(got[1]) || userGone(got[2]) { // an edge of a deleted user is being erased
		return rookery.Time{}, rookery.E(op, rookery.NotFound, "not following")
	}
	return rookery.Time{Time: time.UnixMilli(got[0].Int("followed_at")).UTC()}, nil
}

// Following lists whom id follows, newest first.
func (a *App) Following(ctx context.Context, id, cursor string, limit int) (Page[Follow], error) {
	return a.followList(ctx, "app.Following", followingQuery(id), "followee_id", id, cursor, limit)
}

// Followers lists who follows id, newest first.
func (a *App) Followers(ctx context.Context, id, cursor string, limit int) (Page[Follow], error) {
	return a.followList(ctx, "app.Followers", followersQuery(id), "follower_id", id, cursor, limit)
}

func (a *App) followList(ctx context.Context, op rookery.Op, q table.Query, other, id, cursor string, limit int) (Page[Follow], error) {
	if err := checkList(op, id, limit); err != nil {
		return Page[Follow]{}, err
	}
	if _, err := caller(ctx, op); err != nil {
		return Page[Follow]{}, err
	}
	q.Desc, q.Limit, q.Cursor = true, limit, cursor
	return edgeList(ctx, a, op, q, id, func(it table.Item) string { return it.String(other) }, func(it table.Item, user string) Follow {
		return Follow{UserID: user, FollowedAt: rookery.Time{Time: time.UnixMilli(it.Int("followed_at")).UTC()}}
	})
}

// edgeList reads page q of id's edges (follows, blocks or mutes) and makes an entry of each whose
// other side, other(item), is not a deleted user: the edges of deleted users, the list's owner's
// or the other side's, are being erased, and none is shown (one batch read of the users on the
// page). NotFound if id is deleted, or was never created.
func edgeList[T any](ctx context.Context, a *App, op rookery.Op, q table.Query, id string, other func(table.Item) string, entry func(it table.Item, user string) T) (Page[T], error) {
	p, err := a.table.Query(ctx, q)
	if err != nil {
		return Page[T]{}, err
	}
	if len(p.Items) == 0 {
		if err := a.exists(ctx, op, id); err != nil {
			return Page[T]{}, err
		}
		return Page[T]{Items: []T{}, Next: p.Next}, nil
	}
	ids := []string{id}
	for _, it := range p.Items {
		ids = append(ids, other(it))
	}
	gone, err := a.goneUsers(ctx, ids...)
	if err != nil {
		return Page[T]{}, err
	}
	if gone[id] {
		return Page[T]{}, rookery.E(op, rookery.NotFound, "user not found")
	}
	out := Page[T]{Items: make([]T, 0, len(p.Items)), Next: p.Next}
	for _, it := range p.Items {
		if user := other(it); !gone[user] {
			out.Items = append(out.Items, entry(it, user))
		}
	}
	return out, nil
}

// checkList validates a list request: the user id and a limit of 1..100.
func checkList(op rookery.Op, id string, limit int) error {
	var fe rookery.FieldErrors
	if !rookery.ValidUserID(id) {
		fe.Add("id", "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	checkLimit(&fe, limit)
	return fe.Err(op)
}
