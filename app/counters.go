package app

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// hotCounters batches the increments of post counters (like_count, comment_count), the hottest
// items of the table: a post liked thousands of times a second must not take a write per like.
// It is group commit for counters: the increments that arrive for one post within batchWindow join
// one transaction, which writes every event's applied record and one summed increment. Each
// caller returns only when its batch has committed, so an acknowledged event is always counted,
// and the applied records keep redeliveries from counting twice.
type hotCounters struct {
	table     table.Table
	committed func(ctx context.Context, k table.Key, err error) // told how each increment of k ended
	mu        sync.Mutex
	pending   map[table.Key]*counterBatch // the batch gathering increments, per post item
}

// batchWindow is how long the first increment of a batch waits for others; maxBatch keeps a batch
// within one transaction (the increment takes the last place).
const (
	batchWindow = 2 * time.Millisecond
	maxBatch    = table.MaxTransact - 1
)

type counterBatch struct {
	entries []counterEntry
	done    chan struct{}
	err     error
}

type counterEntry struct {
	applied table.Write // the event's applied record, a conditional put
	attr    string
	delta   int64
}

func newHotCounters(t table.Table) *hotCounters {
	return &hotCounters{table: t, pending: map[table.Key]*counterBatch{}, committed: func(context.Context, table.Key, error) {}}
}

// add counts delta on attribute attr of item k for the event whose applied record is applied, and
// returns when that is committed (or skipped: the event was applied before, or the item is gone).
func (h *hotCounters) add(ctx context.Context, k table.Key, applied table.Write, attr string, delta int64) error {
	h.mu.Lock()
	b, leader := h.pending[k], false
	if b == nil || len(b.entries) >= maxBatch {
		b, leader = &counterBatch{done: make(chan struct{})}, true
		h.pending[k] = b
	}
	b.entries = append(b.entries, counterEntry{applied: applied, attr: attr, delta: delta})
	h.mu.Unlock()
	if !leader {
		select {
		case <-b.done:
			return b.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t := time.NewTimer(batchWindow)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	h.mu.Lock()
	if h.pending[k] == b {
		delete(h.pending, k)
	}
	entries := b.entries
	h.mu.Unlock()
	b.err = h.commit(context.WithoutCancel(ctx), k, entries)
	close(b.done)
	return b.err
}

// commit writes entries' applied records and their summed increments in one transaction. An
// entry whose event was applied before is dropped; if the item is gone, only the records are
// written.
func (h *hotCounters) commit(ctx context.Context, k table.Key, entries []counterEntry) error {
	withCount := true
	for {
		writes := make([]table.Write, 0, len(entries)+1)
		sums := map[string]int64{}
		for _, e := range entries {
			writes = append(writes, e.applied)
			sums[e.attr] += e.delta
		}
		if withCount && len(entries) > 0 {
			sums["rev"] = 1 // the post item's version (postCache)
			writes = append(writes, table.UpdateWrite(k, table.Update{Add: sums}, table.Exists(table.PK)))
		}
		if len(writes) == 0 {
			return nil
		}
		err := h.table.TransactWrite(ctx, writes)
		var ce *table.ConditionError
		switch {
		case err == nil:
			if withCount && len(entries) > 0 {
				h.committed(ctx, k, nil)
			}
			return nil
		case errors.As(err, &ce) && ce.Index < len(entries):
			entries = append(entries[:ce.Index:ce.Index], entries[ce.Index+1:]...) // applied before
		case errors.As(err, &ce):
			withCount = false // the post is gone: nothing to count on
		default:
			h.committed(ctx, k, err) // it may have committed (a timeout)
			return err
		}
	}
}

// appliedRecord is the write of group's record that it applied the event with id, committed with
// the event's other writes: a put on the condition that there is none yet, which a redelivery fails
// (the event was applied), or on the event's first delivery (events.IsFirstDelivery) a put that
// reads nothing: there can be none yet, and the embedded store's read for a key it does not hold
// was a fifth of the notifications' transaction (docs/performance-history.md, "Session 53").
func (a *App) appliedRecord(ctx context.Context, group, id string) table.Write {
	k := appliedKey(group, id)
	it := table.Item{table.PK: k.PK, table.SK: k.SK, table.TTL: a.clock.Now().Add(appliedTTL).Unix()}
	return putNew(ctx, it)
}

// putNew is the put of an item that a redelivered event's handler may find made already (an
// applied record, say): conditioned on its absence, except on the event's first delivery.
func putNew(ctx context.Context, it table.Item) table.Write {
	if events.IsFirstDelivery(ctx) {
		return table.ImmutablePutWrite(it)
	}
	return table.PutWrite(it, table.NotExists(table.PK))
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
	record := a.appliedRecord(ctx, CountersGroup, ev.ID)
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
		p, err := a.postPayload(ev)
		if err != nil || p.AuthorID == "" {
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
