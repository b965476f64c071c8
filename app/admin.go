package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// The dead-letter queue's administration: server-scope tokens only.

func (a *App) checkDLQ(ctx context.Context, op rookery.Op, group string) error {
	if err := asServer(ctx, op); err != nil {
		return err
	}
	if !rookery.ValidUserID(group) {
		return rookery.FieldErrors{{Name: "group", Reason: "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -"}}.Err(op)
	}
	if a.events == nil {
		return rookery.E(op, rookery.Unavailable, "this process has no event log")
	}
	if groups := a.groups(); !slices.Contains(groups, group) {
		return rookery.E(op, rookery.NotFound, fmt.Sprintf("no consumer group %q; the groups are %s", group, strings.Join(groups, ", ")))
	}
	return nil
}

// groups are the names of the consumer groups whose dead letters may be administered, sorted.
func (a *App) groups() []string {
	groups := slices.Clone(a.otherGroups)
	for _, c := range a.Consumers() {
		groups = append(groups, c.Group)
	}
	slices.Sort(groups)
	return slices.Compact(groups)
}

// DeadLetters lists group's dead letters, oldest first: up to limit (1..100) after the event id
// after; the page's Next is the id to pass as after for the next page, or "" on the last.
func (a *App) DeadLetters(ctx context.Context, group, after string, limit int) (Page[events.DeadLetter], error) {
	const op rookery.Op = "app.DeadLetters"
	if err := a.checkDLQ(ctx, op, group); err != nil {
		return Page[events.DeadLetter]{}, err
	}
	if err := limitErr(op, limit); err != nil {
		return Page[events.DeadLetter]{}, err
	}
	list, err := a.events.DeadLetters(ctx, group, after, limit+1)
	if err != nil {
		return Page[events.DeadLetter]{}, err
	}
	p := Page[events.DeadLetter]{Items: list}
	if len(list) > limit {
		p.Items = list[:limit]
		p.Next = list[limit-1].Event.ID
	}
	return p, nil
}

// DeadLetter returns group's dead letter of event id (NotFound if there is none).
func (a *App) DeadLetter(ctx context.Context, group, id string) (events.DeadLetter, error) {
	const op rookery.Op = "app.DeadLetter"
	if err := a.checkDLQ(ctx, op, group); err != nil {
		return events.DeadLetter{}, err
	}
	return a.events.DeadLetterByID(ctx, group, id)
}

// ReplayDeadLetter delivers the dead event id to group again and removes it from the queue.
func (a *App) ReplayDeadLetter(ctx context.Context, group, id string) error {
	const op rookery.Op = "app.ReplayDeadLetter"
	if err := a.checkDLQ(ctx, op, group); err != nil {
		return err
	}
	return a.events.Replay(ctx, group, id)
}

// DropDeadLetter removes the dead event id from group's queue without delivering it.
func (a *App) DropDeadLetter(ctx context.Context, group, id string) error {
	const op rookery.Op = "app.DropDeadLetter"
	if err := a.checkDLQ(ctx, op, group); err != nil {
		return err
	}
	return a.events.Drop(ctx, group, id)
}
