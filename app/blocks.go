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
		if got[0] == nil || userGone(got[0]) || userGone(got[4]) {
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

// Unblock lifts id's block of target (follows that the block ended stay ended).
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
	if got[0] == nil || userGone(got[0]) || userGone(got[1]) {
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

// Unmute lifts id's mute of target.
func (a *App) Unmute(ctx context.Context, id, target string) error {
	return a.removeRelation(ctx, "app.Unmute", id, target, muteKey(id, target), MuteDeleted, "mute:")
}

func (a *App) removeRelation(ctx context.Context, op rookery.Op, id, target string, k table.Key, typ, keyPrefix string) error {
	if err := a.checkEdge(ctx, op, id, target); err != nil {
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
