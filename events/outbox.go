package events

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// Outbox is the transactional outbox (DESIGN decision 5). A change that others react to is written
// together with its event: the caller adds Outbox.Write(ev) to the same TransactWrite as the change,
// so either both are stored or neither. Run relays stored events to the log and then deletes them;
// a crash between the two appends an event twice, which the log de-duplicates by id. Nothing that
// was acknowledged is lost, and the outbox is read by partition (Query), never scanned.
//
// Outbox items (the key schema of app/keys.go refers here):
//
//	PK OUTBOX#<shard>   SK <event id>   event: the event's stored form (codec.go)
//
// An event's shard is a hash of its key, so one key's events are relayed by one loop, in id order.
// The number of shards must stay the same for the life of a table.
type Outbox struct {
	Table table.Table
	Log   Log
	// Shards is the number of outbox partitions; 0 means DefaultOutboxShards.
	Shards int
	// Poll is how often an idle shard looks for events nobody notified it of (written by another
	// process); 0 means 100 ms. A Direct outbox's shards look at least a second apart (idlePoll).
	Poll time.Duration
	// Batch is the most events relayed per round; 0 means 500.
	Batch  int
	Logger *slog.Logger
	Clock  rookery.Clock // nil means the system clock
	// Direct says that the table appends the outbox's events to the log itself, in the
	// transactions that write them (table/pebble with the embedded log on its engine as its
	// Stager; see events/embedded's stage.go). Write then only makes the write; call Flush
	// before the first write, so that what an earlier run left in the outbox goes first.
	Direct bool

	once    sync.Once
	wake    []chan struct{}
	pending []pendingIDs // per shard: ids Write handed out that the relay has not moved yet
}

// pendingIDs are ids written through this Outbox and not yet relayed. Their transaction may commit
// after events with later ids were relayed; the relay reads from the smallest of them so it cannot
// pass them by. An id whose transaction never commits is forgotten after pendingTTL.
type pendingIDs struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

const pendingTTL = 10 * time.Second

func (p *pendingIDs) add(id string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[string]time.Time{}
	}
	p.ids[id] = now
}

// any reports whether there are pending ids.
func (p *pendingIDs) any() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids) > 0
}

// lowest returns the smallest pending id, dropping those pending since pendingTTL before now, or
// "" if none.
func (p *pendingIDs) lowest(now time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	low := ""
	for id, at := range p.ids {
		if now.Sub(at) > pendingTTL {
			delete(p.ids, id)
			continue
		}
		if low == "" || id < low {
			low = id
		}
	}
	return low
}

func (p *pendingIDs) done(evs []rookery.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs {
		delete(p.ids, ev.ID)
	}
}

// DefaultOutboxShards is the outbox's default partition count.
const DefaultOutboxShards = 16

// now is the Outbox's clock's time.
func (o *Outbox) now() time.Time {
	if o.Clock == nil {
		return rookery.SystemClock.Now()
	}
	return o.Clock.Now()
}

func (o *Outbox) init() {
	o.once.Do(func() {
		if o.Shards <= 0 {
			o.Shards = DefaultOutboxShards
		}
		if o.Poll <= 0 {
			o.Poll = 100 * time.Millisecond
		}
		if o.Batch <= 0 {
			o.Batch = 500
		}
		if o.Logger == nil {
			o.Logger = slog.Default()
		}
		o.pending = make([]pendingIDs, o.Shards)
		o.wake = make([]chan struct{}, o.Shards)
		for i := range o.wake {
			o.wake[i] = make(chan struct{}, 1)
		}
	})
}

func (o *Outbox) shard(key string) int { return Partition(key, o.Shards) }

// directPoll is the least time a Direct outbox's idle shard waits before it reads again.
const directPoll = time.Second

// idlePoll is how long an idle shard waits for a Notify before it reads again: Poll, or at least
// directPoll when Direct, where no write leaves its event in the outbox and the reads only make
// sure of it (each read of an empty shard costs CPU, sixteen shards ten times a second).
func (o *Outbox) idlePoll() time.Duration {
	if o.Direct {
		return max(o.Poll, directPoll)
	}
	return o.Poll
}

// OutboxPrefix begins the partition key of every outbox item.
const OutboxPrefix = "OUTBOX#"

func outboxPK(shard int) string { return fmt.Sprintf("%s%03d", OutboxPrefix, shard) }

// Write returns the table write that stores ev in the outbox; put it in the same TransactWrite as
// the change that causes ev. An event without id, type or key is Invalid.
func (o *Outbox) Write(ev rookery.Event) (table.Write, error) {
	const op rookery.Op = "events.Outbox.Write"
	o.init()
	if ev.ID == "" || ev.Type == "" || ev.Key == "" {
		return table.Write{}, rookery.E(op, rookery.Invalid, "an event needs an id, a type and a key")
	}
	b, err := AppendEvent(nil, ev)
	if err != nil {
		return table.Write{}, rookery.E(op, err) // Invalid: the payload is not JSON
	}
	shard := o.shard(ev.Key)
	if !o.Direct {
		o.pending[shard].add(ev.ID, o.now())
	}
	// An event is the same whenever its id is written, so the put need not read the key first.
	return table.ImmutablePutWrite(table.Item{table.PK: outboxPK(shard), table.SK: ev.ID, "event": b}), nil
}

// OutboxEvent returns the stored event (codec.go) that w writes, if w is a write Outbox.Write made.
func OutboxEvent(w table.Write) ([]byte, bool) {
	if w.Kind != table.WritePut || !w.Immutable {
		return nil, false
	}
	if pk, _ := w.Item[table.PK].(string); !strings.HasPrefix(pk, OutboxPrefix) {
		return nil, false
	}
	b, ok := w.Item["event"].([]byte)
	return b, ok
}

// Notify tells the relay that events were written (call it after the transaction that holds
// them commits), so it need not wait for its next poll; it wakes every shard that holds ids Write
// handed out and the relay has not moved, the caller's among them. (Waking only the shards written
// since the last Notify lost wake-ups: a Notify for one transaction could take the flag of another
// that had not committed yet, whose own Notify then woke nobody, and its event waited a whole
// Poll.) Calling it is optional and never blocks.
func (o *Outbox) Notify() {
	o.init()
	for i, w := range o.wake {
		if !o.pending[i].any() {
			continue
		}
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Run relays outbox events to the log until ctx ends, one loop per shard, and returns nil. Failures
// (the table or the log unavailable) are logged and retried with backoff; nothing is skipped.
func (o *Outbox) Run(ctx context.Context) error {
	o.init()
	var wg sync.WaitGroup
	for s := range o.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.relay(ctx, s)
		}()
	}
	wg.Wait()
	return nil
}

// Flush relays everything in the outbox now and returns once it is empty (or ctx ends, or a
// round fails). A Direct outbox's owner calls it before the first write: events an earlier version
// (or a run without Direct) left in the outbox then reach the log ahead of newer events of their
// key, which Direct writes put straight into the log.
func (o *Outbox) Flush(ctx context.Context) error {
	o.init()
	for s := range o.Shards {
		for from := (table.SKCond{}); ; {
			last, full, err := o.relayOnce(ctx, s, from)
			if err != nil {
				return err
			}
			if !full {
				break
			}
			from = table.SKCond{Op: table.SKGt, Value: last} // past an item left in place, too
		}
	}
	return nil
}

// relay is one shard's loop. It reads past the last event it relayed, so it does not step over
// the deleted items (tombstones, in an LSM) of everything relayed before, but never past an id this
// Outbox handed out and has not relayed yet; and once per Poll it reads the shard from the start,
// which picks up events other processes committed out of id order.
func (o *Outbox) relay(ctx context.Context, shard int) {
	failures := 0
	after, lastFull := "", o.now()
	for ctx.Err() == nil {
		from := table.SKCond{Op: table.SKGt, Value: after}
		if now := o.now(); after == "" || now.Sub(lastFull) >= o.Poll {
			from, lastFull = table.SKCond{}, now
		}
		if low := o.pending[shard].lowest(o.now()); low != "" && from.Op == table.SKGt && low <= after {
			from = table.SKCond{Op: table.SKGe, Value: low}
		}
		last, full, err := o.relayOnce(ctx, shard, from)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := DefaultBackoff(failures)
			o.Logger.Warn("outbox relay failed; retrying", "shard", shard, "retry_in", delay, "err", err)
			rookery.Sleep(ctx, delay)
			continue
		}
		failures = 0
		after = max(after, last)
		if full {
			continue // there may be more at once
		}
		// The shard held no more than this round took: wait for a Notify (an event written since
		// the round's read left its wake-up in the channel) or the poll, instead of reading again.
		t := time.NewTimer(o.idlePoll())
		select {
		case <-ctx.Done():
		case <-o.wake[shard]:
		case <-t.C:
		}
		t.Stop()
	}
}

// relayOnce moves up to Batch events of shard whose ids satisfy from to the log and returns the
// last id it moved ("" if there were none) and whether it read a full Batch.
func (o *Outbox) relayOnce(ctx context.Context, shard int, from table.SKCond) (last string, full bool, err error) {
	page, err := o.Table.Query(ctx, table.Query{PK: outboxPK(shard), SK: from, Limit: o.Batch})
	if err != nil || len(page.Items) == 0 {
		return "", false, err
	}
	evs := make([]rookery.Event, 0, len(page.Items))
	relayed := make([]table.Item, 0, len(page.Items))
	for _, it := range page.Items {
		ev, err := DecodeEvent(it.Bytes("event"))
		if err != nil {
			// Write only stores events that decode, so this is corruption: keep it, say so, relay
			// the rest.
			o.Logger.Error("outbox item is not a valid event; left in place", "shard", shard, "id", it.String(table.SK), "err", err)
			continue
		}
		evs = append(evs, ev)
		relayed = append(relayed, it)
	}
	if err := o.Log.Append(ctx, evs); err != nil {
		return "", false, err
	}
	o.pending[shard].done(evs)
	for chunk := range slices.Chunk(relayed, table.MaxTransact) {
		ws := make([]table.Write, len(chunk))
		for i, it := range chunk {
			ws[i] = table.ImmutableDeleteWrite(it)
		}
		if err := o.Table.TransactWrite(ctx, ws); err != nil {
			return "", false, err // appended already: the next round appends them again, de-duplicated
		}
	}
	return page.Items[len(page.Items)-1].String(table.SK), len(page.Items) == o.Batch, nil
}

// Sweep relays the outbox items whose ids are in seen and returns the ids of the others it read: a relay that reads the table's stream calls it periodically with what the
// previous call returned, so that an item the stream did not bring is relayed one period later.
// It reads up to Batch items per shard.
func (o *Outbox) Sweep(ctx context.Context, seen map[string]struct{}) (map[string]struct{}, int, error) {
	o.init()
	next := map[string]struct{}{}
	n := 0
	for s := range o.Shards {
		page, err := o.Table.Query(ctx, table.Query{PK: outboxPK(s), Limit: o.Batch})
		if err != nil {
			return nil, n, err
		}
		var evs []rookery.Event
		var relayed []table.Write
		for _, it := range page.Items {
			id := it.String(table.SK)
			if _, ok := seen[id]; !ok {
				next[id] = struct{}{}
				continue
			}
			ev, err := DecodeEvent(it.Bytes("event"))
			if err != nil {
				continue // Write stores only events that decode; relayOnce logs it
			}
			evs = append(evs, ev)
			relayed = append(relayed, table.ImmutableDeleteWrite(it))
		}
		if len(evs) == 0 {
			continue
		}
		if err := o.Log.Append(ctx, evs); err != nil {
			return nil, n, err
		}
		if err := o.Table.BatchWrite(ctx, relayed); err != nil {
			return nil, n, err
		}
		n += len(evs)
	}
	return next, n, nil
}

// Pending reports how many events wait in the outbox, counting at most limit per shard.
func (o *Outbox) Pending(ctx context.Context, limit int) (int, error) {
	o.init()
	n := 0
	for s := range o.Shards {
		page, err := o.Table.Query(ctx, table.Query{PK: outboxPK(s), Limit: limit})
		if err != nil {
			return 0, err
		}
		n += len(page.Items)
	}
	return n, nil
}
