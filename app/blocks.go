package app

import (
	"context"
	"errors"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Event types of blocks and mutes (the home feed's cleanup consumes them).
const (
	BlockCreated = "BlockCreated"
	BlockDeleted = "BlockDeleted"
	MuteCreated  = "MuteCreated"
	MuteDeleted  = "MuteDeleted"
)

// RelationPayload is the payload of block and mute events, version 1.
type RelationPayload struct {
	UserID   string       `json:"user_id"`
	TargetID string       `json:"target_id"`
	At       rookery.Time `json:"at"`
}

// Block makes id block target: the follows between them end (both ways, with their events, so the
// counts follow), neither sees the other's posts anywhere, and target can no longer follow, like,
// comment on the posts of, or mention id. Blocking again changes nothing.
func (a *App) Block(ctx context.Context, id, target string) error {
	const op rookery.Op = "app.Block"
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return err
	}
	defer a.followers.change(id)() // the follows both ways end
	defer a.followers.change(target)()
	defer a.edgeChange(id, target)()
	for attempt := 0; attempt < 5; attempt++ {
		got, err := a.table.BatchGet(ctx, []table.Key{userKey(target), blockKey(id, target), followKey(id, target), followKey(target, id), userKey(id)})
		if err != nil {
			return err
		}
		if got[0] == nil || got[4] == nil || userGone(got[0]) || userGone(got[4]) {
			return rookery.E(op, rookery.NotFound, "user not found")
		}
		if got[1] != nil {
			return nil // blocked before
		}
		now := a.clock.Now().UTC().Truncate(time.Millisecond)
		k := blockKey(id, target)
		writes := []table.Write{table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "blocked_at": now.UnixMilli(),
			gsi3.PK: blockedByPK(target), gsi3.SK: id}, table.NotExists(table.PK))}
		evs := []rookery.Event{}
		ev, err := a.event(ctx, BlockCreated, "block:"+id+":"+target, RelationPayload{UserID: id, TargetID: target, At: rookery.Time{Time: now}}, now)
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		evs = append(evs, ev)
		// End the follows that exist, each with its FollowDeleted (conditional: a concurrent change
		// fails the transaction, and it is tried again from the start).
		for _, edge := range [][2]string{{id, target}, {target, id}} {
			k := followKey(edge[0], edge[1])
			if got[2] == nil && edge[0] == id || got[3] == nil && edge[0] == target {
				writes = append(writes, table.CheckWrite(k, table.NotExists(table.PK)))
				continue
			}
			writes = append(writes, table.DeleteWrite(k, table.Exists(table.PK)))
			fe, err := a.event(ctx, FollowDeleted, followEdgeKey(edge[0], edge[1]), FollowPayload{FollowerID: edge[0], FolloweeID: edge[1], At: rookery.Time{Time: now}}, now)
			if err != nil {
				return rookery.E(op, rookery.Internal, err)
			}
			evs = append(evs, fe)
		}
		err = a.writeWithEvent(ctx, writes, evs...)
		var ce *table.ConditionError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce):
			continue // something changed meanwhile: read again
		default:
			return err
		}
	}
	return rookery.E(op, rookery.Conflict, "the users are being changed concurrently; retry")
}

// Unblock lifts id's block of target (follows that the block ended stay ended). It succeeds also
// when there was none; both must be users (NotFound otherwise).
func (a *App) Unblock(ctx context.Context, id, target string) error {
	return a.removeRelation(ctx, "app.Unblock", id, target, blockKey(id, target), BlockDeleted, "block:")
}

// Mute makes target's posts leave and stay out of id's home feed. Muting again changes nothing.
func (a *App) Mute(ctx context.Context, id, target string) error {
	const op rookery.Op = "app.Mute"
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return err
	}
	got, err := a.table.BatchGet(ctx, []table.Key{userKey(target), userKey(id)})
	if err != nil {
		return err
	}
	if got[0] == nil || got[1] == nil || userGone(got[0]) || userGone(got[1]) {
		return rookery.E(op, rookery.NotFound, "user not found")
	}
	defer a.edgeChange(id, target)()
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	k := muteKey(id, target)
	ev, err := a.event(ctx, MuteCreated, "mute:"+id+":"+target, RelationPayload{UserID: id, TargetID: target, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, []table.Write{table.PutWrite(table.Item{table.PK: k.PK, table.SK: k.SK, "muted_at": now.UnixMilli(),
		gsi3.PK: mutedByPK(target), gsi3.SK: id}, table.NotExists(table.PK))}, ev)
	if rookery.IsKind(err, rookery.Conflict) {
		return nil // muted before
	}
	return err
}

// Unmute lifts id's mute of target. It succeeds also when there was none; both must be users.
func (a *App) Unmute(ctx context.Context, id, target string) error {
	return a.removeRelation(ctx, "app.Unmute", id, target, muteKey(id, target), MuteDeleted, "mute:")
}

func (a *App) removeRelation(ctx context.Context, op rookery.Op, id, target string, k table.Key, typ, keyPrefix string) error {
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return err
	}
	if err := a.bothExist(ctx, op, id, target); err != nil {
		return err
	}
	defer a.edgeChange(id, target)()
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.event(ctx, typ, keyPrefix+id+":"+target, RelationPayload{UserID: id, TargetID: target, At: rookery.Time{Time: now}}, now)
	if err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	err = a.writeWithEvent(ctx, []table.Write{table.DeleteWrite(k, table.Exists(table.PK))}, ev)
	if rookery.IsKind(err, rookery.Conflict) {
		return nil // there was none
	}
	return err
}

// blockedBy returns Forbidden if owner has blocked user.
func (a *App) blockedBy(ctx context.Context, op rookery.Op, owner, user string) error {
	blocked, err := a.haveBlocked(ctx, []string{owner}, user)
	if err != nil {
		return err
	}
	if blocked[0] {
		return rookery.E(op, rookery.Forbidden, "this user has blocked you")
	}
	return nil
}

// Blocked is an entry of a user's blocks list: whom they blocked, and when.
type Blocked struct {
	UserID    string       `json:"user_id"`
	BlockedAt rookery.Time `json:"blocked_at"`
}

// Muted is an entry of a user's mutes list: whom they muted, and when.
type Muted struct {
	UserID  string       `json:"user_id"`
	MutedAt rookery.Time `json:"muted_at"`
}

// Blocks lists whom id has blocked, by user id. A user's blocks and mutes are theirs alone: only
// they (or a server token) may read them.
func (a *App) Blocks(ctx context.Context, id, cursor string, limit int) (Page[Blocked], error) {
	return relationList(ctx, a, "app.Blocks", blockKey(id, "").PK, "blocked_at", id, cursor, limit,
		func(user string, at rookery.Time) Blocked { return Blocked{UserID: user, BlockedAt: at} })
}

// Mutes lists whom id has muted, by user id; only they (or a server token) may read it.
func (a *App) Mutes(ctx context.Context, id, cursor string, limit int) (Page[Muted], error) {
	return relationList(ctx, a, "app.Mutes", muteKey(id, "").PK, "muted_at", id, cursor, limit,
		func(user string, at rookery.Time) Muted { return Muted{UserID: user, MutedAt: at} })
}

// BlockedAt returns when id blocked target, or NotFound if id has not; only id (or a server token)
// may ask.
func (a *App) BlockedAt(ctx context.Context, id, target string) (rookery.Time, error) {
	return a.relationAt(ctx, "app.BlockedAt", blockKey(id, target), "blocked_at", "not blocked", id, target)
}

// MutedAt returns when id muted target, or NotFound if id has not; only id (or a server token) may
// ask.
func (a *App) MutedAt(ctx context.Context, id, target string) (rookery.Time, error) {
	return a.relationAt(ctx, "app.MutedAt", muteKey(id, target), "muted_at", "not muted", id, target)
}

// relationList reads a page of id's relations (blocks or mutes) under pk, keyed by the other user,
// with the time in attr.
func relationList[T any](ctx context.Context, a *App, op rookery.Op, pk, attr, id, cursor string, limit int, entry func(user string, at rookery.Time) T) (Page[T], error) {
	if err := checkList(op, id, limit); err != nil {
		return Page[T]{}, err
	}
	if err := actAs(ctx, op, id); err != nil {
		return Page[T]{}, err
	}
	q := table.Query{PK: pk, Limit: limit, Cursor: cursor}
	return edgeList(ctx, a, op, q, id, func(it table.Item) string { return it.String(table.SK) }, func(it table.Item, user string) T {
		return entry(user, rookery.Time{Time: time.UnixMilli(it.Int(attr)).UTC()})
	})
}

// relationAt reads relation k of id with target and returns its time (attr), or NotFound (missing).
func (a *App) relationAt(ctx context.Context, op rookery.Op, k table.Key, attr, missing, id, target string) (rookery.Time, error) {
	if err := a.checkEdge(ctx, op, id, target); err != nil {
		return rookery.Time{}, err
	}
	got, err := a.table.BatchGet(ctx, []table.Key{k, userKey(id), userKey(target)})
	if err != nil {
		return rookery.Time{}, err
	}
	if got[0] == nil || userGone(got[1]) || userGone(got[2]) { // a relation of a deleted user is being erased
		return rookery.Time{}, rookery.E(op, rookery.NotFound, missing)
	}
	return rookery.Time{Time: time.UnixMilli(got[0].Int(attr)).UTC()}, nil
}
