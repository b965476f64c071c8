// Package ddbrelay is the outbox relay over DynamoDB Streams (seed 000 B6, seed 001's CDC): instead
// of querying the outbox partitions for new items, it reads the table's stream, where every outbox
// item a transaction commits appears once, in commit order per partition key, and appends their
// events to the log. What it relayed it deletes from the outbox, as the polling relay does, so either
// relay can take over from the other.
//
// Shards. A stream is a set of shards; a shard is read from its start (or from its checkpoint) to
// its end, and a shard's children start only once it is done (their records follow its records).
// Each shard has a lease item in the table:
//
//	PK STREAMRELAY#<stream label>   SK <shard id>
//	owner, until (Unix ms), seq (the last sequence number relayed), done (1 once read to its end),
//	parent, start ("latest" for the shards of the relay's first start), v (version, for the
//	conditional writes)
//
// Workers share the shards: each claims (a conditional write on the version) shards whose lease is
// free or expired and whose parent is done, up to its share among the live owners, reads them,
// checkpoints after every append (renewing the lease), and gives up a shard when a write finds the
// version moved (another worker took it). Delivery is at least once: a crash between an append and
// its checkpoint appends those events again, and the log drops them by id.
//
// The first start of the relay on a table takes each shard's position at the stream's newest record,
// then relays what is in the outbox (as the polling relay would: whatever was committed before
// that position is there), then reads the stream from that position; the stream's older records,
// relayed already by whatever relay ran before, are not read again. A sweep every minute relays any
// outbox item seen by two sweeps in a row (which the stream did not bring: trimmed after 24 hours,
// say), when this process reads shards and has read all of them to their newest record, so that a
// relay behind its stream is not overtaken.
package ddbrelay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// Options configure a Relay.
type Options struct {
	DynamoDB  *dynamodb.Client        // DescribeTable: the stream's ARN
	Streams   *dynamodbstreams.Client // the stream's shards and records
	TableName string
	// Table is the same table through Rookery's table layer: leases and checkpoints, and the deletes
	// of relayed outbox items.
	Table  table.Table
	Outbox *events.Outbox // its sweep relays what the stream did not bring
	Log    events.Log
	// Owner names this process in the leases; it must be unique among the workers.
	Owner string
	// LeaseTTL is how long a shard stays with a worker that stopped renewing; 0 means 10 s.
	LeaseTTL time.Duration
	// Poll is the least time between two reads of a shard, but when the last read brought a full
	// page; 0 means 250 ms: AWS allows 5 reads a second per shard (Lambda's pollers read 4).
	Poll time.Duration
	// Sweep is how often the outbox is swept; 0 means 1 minute.
	Sweep  time.Duration
	Logger *slog.Logger
	// Relayed, if set, is told each batch appended: how many events, how many GetRecords calls it
	// took, and each event's time from its occurrence to its append.
	Relayed func(events, reads int, ages []time.Duration)
}

// Relay relays the outbox through the table's stream.
type Relay struct {
	o     Options
	log   *slog.Logger
	arn   string
	label string
	pk    string

	mu    sync.Mutex
	atTip map[string]bool // the shards this process reads: whether their last read was the newest
}

// New returns a relay. The table's stream is looked up when it runs.
func New(ctx context.Context, o Options) (*Relay, error) {
	const op rookery.Op = "ddbrelay.New"
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Sweep <= 0 {
		o.Sweep = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Owner == "" {
		return nil, rookery.E(op, rookery.Invalid, "an owner name is required")
	}
	return &Relay{o: o, log: o.Logger.With("component", "stream relay"), atTip: map[string]bool{}}, nil
}

// findStream looks up the table's stream; it fails unless the table has one with new images
// (rookery migrate enables it).
func (r *Relay) findStream(ctx context.Context) error {
	const op rookery.Op = "ddbrelay.findStream"
	desc, err := r.o.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.o.TableName)})
	if err != nil {
		return rookery.E(op, rookery.Unavailable, "describing the table", err)
	}
	t := desc.Table
	if t.LatestStreamArn == nil || t.StreamSpecification == nil || !aws.ToBool(t.StreamSpecification.StreamEnabled) ||
		(t.StreamSpecification.StreamViewType != "NEW_IMAGE" && t.StreamSpecification.StreamViewType != "NEW_AND_OLD_IMAGES") {
		return rookery.E(op, rookery.Invalid, "table "+r.o.TableName+" has no stream with new images: run rookery migrate")
	}
	r.arn, r.label = aws.ToString(t.LatestStreamArn), aws.ToString(t.LatestStreamLabel)
	r.pk = "STREAMRELAY#" + r.label
	return nil
}

// lease is a shard's lease item.
type lease struct {
	shard, owner, seq, parent, start string
	until                            int64
	done                             bool
	v                                int64
}

func (r *Relay) leaseOf(it table.Item) lease {
	return lease{shard: it.String(table.SK), owner: it.String("owner"), seq: it.String("seq"), parent: it.String("parent"),
		start: it.String("start"), until: it.Int("until"), done: it.Int("done") == 1, v: it.Int("v")}
}

// write stores l with the next version, if its version is still l.v; false if another worker
// wrote it since.
func (r *Relay) write(ctx context.Context, l *lease) (bool, error) {
	done := int64(0)
	if l.done {
		done = 1
	}
	it := table.Item{table.PK: r.pk, table.SK: l.shard, "owner": l.owner, "until": l.until, "seq": l.seq, "done": done,
		"parent": l.parent, "start": l.start, "v": l.v + 1}
	err := r.o.Table.Put(ctx, it, table.VersionIs("v", l.v))
	if rookery.IsKind(err, rookery.Conflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.v++
	return true, nil
}

// Run relays until ctx ends, and returns nil; failures are logged and retried.
func (r *Relay) Run(ctx context.Context) error {
	for failures := 1; ; failures++ {
		err := r.findStream(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := events.DefaultBackoff(failures)
		r.log.Warn("the table's stream cannot be read yet; retrying", "retry_in", delay, "err", err)
		rookery.Sleep(ctx, delay)
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.sweep(ctx) })
	running := map[string]bool{} // shards this process reads
	var mu sync.Mutex
	for ctx.Err() == nil {
		claimed, err := r.claim(ctx, func(shard string) bool { mu.Lock(); defer mu.Unlock(); return running[shard] })
		if err != nil && ctx.Err() == nil {
			r.log.Warn("listing or claiming the stream's shards failed; retrying", "err", err)
		}
		for _, l := range claimed {
			mu.Lock()
			running[l.shard] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(running, l.shard)
					mu.Unlock()
					r.mu.Lock()
					delete(r.atTip, l.shard)
					r.mu.Unlock()
				}()
				if err := r.read(ctx, l); err != nil && ctx.Err() == nil {
					r.log.Warn("reading a stream shard stopped", "shard", l.shard, "err", err)
				}
			})
		}
		rookery.Sleep(ctx, r.o.LeaseTTL/3)
	}
	wg.Wait()
	return nil
}

// shards lists the stream's shards: id -> parent.
func (r *Relay) shards(ctx context.Context) (map[string]string, []string, error) {
	parents := map[string]string{}
	var order []string
	var start *string
	for {
		out, err := r.o.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.arn), ExclusiveStartShardId: start})
		if err != nil {
			return nil, nil, err
		}
		for _, s := range out.StreamDescription.Shards {
			id := aws.ToString(s.ShardId)
			parents[id] = aws.ToString(s.ParentShardId)
			order = append(order, id)
		}
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			return parents, order, nil
		}
	}
}

// claim creates the leases of new shards and takes those this process may read: free or expired,
// not done, their parent done or gone, up to its share among the live owners.
func (r *Relay) claim(ctx context.Context, mine func(string) bool) ([]*lease, error) {
	parents, order, err := r.shards(ctx)
	if err != nil {
		return nil, err
	}
	page, err := r.o.Table.Query(ctx, table.Query{PK: r.pk, Limit: 1000})
	if err != nil {
		return nil, err
	}
	leases := map[string]*lease{}
	for _, it := range page.Items {
		l := r.leaseOf(it)
		leases[l.shard] = &l
	}
	first := len(leases) == 0
	for _, id := range order {
		if leases[id] != nil {
			continue
		}
		l := &lease{shard: id, parent: parents[id]}
		if first {
			// The relay's first start: from the newest records; the sweep relays what is older.
			l.start = "latest"
		}
		if ok, err := r.write(ctx, l); err != nil {
			return nil, err
		} else if ok {
			leases[id] = l
		}
	}
	now := time.Now().UnixMilli()
	live := map[string]bool{r.o.Owner: true}
	open, held := 0, 0
	for _, l := range leases {
		if l.done {
			continue
		}
		open++
		if l.owner != "" && l.until > now {
			live[l.owner] = true
			if l.owner == r.o.Owner {
				held++
			}
		}
	}
	share := (open + len(live) - 1) / len(live)
	var claimed []*lease
	for _, id := range order {
		l := leases[id]
		if l == nil || l.done || held >= share || mine(id) {
			continue
		}
		if l.owner != "" && l.until > now && l.owner != r.o.Owner {
			continue
		}
		if p := leases[l.parent]; p != nil && !p.done {
			continue // its records follow its parent's
		}
		l.owner, l.until = r.o.Owner, now+r.o.LeaseTTL.Milliseconds()
		if ok, err := r.write(ctx, l); err != nil {
			return claimed, err
		} else if ok {
			claimed = append(claimed, l)
			held++
		}
	}
	return claimed, nil
}

// maxRecords is the most records a GetRecords returns.
const maxRecords = 1000

// read relays shard l from its checkpoint to its end, or until the lease is lost or ctx ends.
func (r *Relay) read(ctx context.Context, l *lease) error {
	r.setTip(l.shard, false)
	iter, err := r.iterator(ctx, l)
	if err != nil {
		return err
	}
	if l.seq == "" && l.start == "latest" {
		// The first start: what was committed before the position just taken is in the outbox.
		if err := r.o.Outbox.Flush(ctx); err != nil {
			return err
		}
	}
	reads, failures := 0, 0
	for ctx.Err() == nil {
		if iter == nil {
			l.done = true
			_, err := r.write(ctx, l)
			return err
		}
		began := time.Now()
		out, err := r.o.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(maxRecords)})
		reads++
		var expired *types.ExpiredIteratorException
		var trimmed *types.TrimmedDataAccessException
		switch {
		case errors.As(err, &expired):
			if iter, err = r.iterator(ctx, l); err != nil {
				return err
			}
			continue
		case errors.As(err, &trimmed):
			// Records past the stream's 24 hours are gone; what they were is in the outbox still,
			// for the sweep. Go on from the oldest record kept.
			r.log.Warn("a stream shard's checkpoint is older than the stream keeps; the sweep relays what was lost", "shard", l.shard)
			l.seq, l.start = "", ""
			if iter, err = r.iterator(ctx, l); err != nil {
				return err
			}
			continue
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			delay := events.DefaultBackoff(failures)
			r.log.Warn("reading a stream shard failed; retrying", "shard", l.shard, "retry_in", delay, "err", err)
			rookery.Sleep(ctx, delay)
			continue
		}
		failures = 0
		iter = out.NextShardIterator
		r.setTip(l.shard, len(out.Records) < maxRecords)
		now := time.Now()
		if len(out.Records) > 0 {
			if err := r.relay(ctx, out.Records, reads); err != nil {
				return err // not checkpointed: whoever reads the shard next appends them again
			}
			reads = 0
			l.seq = aws.ToString(out.Records[len(out.Records)-1].Dynamodb.SequenceNumber)
		}
		if len(out.Records) > 0 || time.UnixMilli(l.until).Sub(now) < r.o.LeaseTTL*2/3 {
			l.until = now.Add(r.o.LeaseTTL).UnixMilli()
			if ok, err := r.write(ctx, l); err != nil || !ok {
				if err == nil {
					r.log.Info("a stream shard moved to another worker", "shard", l.shard)
				}
				return err
			}
		}
		if len(out.Records) < maxRecords && iter != nil {
			rookery.Sleep(ctx, r.o.Poll-time.Since(began))
		}
	}
	return nil
}

func (r *Relay) iterator(ctx context.Context, l *lease) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(l.shard)}
	switch {
	case l.seq != "":
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(l.seq)
	case l.start == "latest":
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	default:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	}
	out, err := r.o.Streams.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// relay appends the events of the outbox items among records, then deletes those items.
func (r *Relay) relay(ctx context.Context, records []types.Record, reads int) error {
	var evs []rookery.Event
	var relayed []table.Write
	for _, rec := range records {
		if rec.EventName != types.OperationTypeInsert && rec.EventName != types.OperationTypeModify {
			continue
		}
		img := rec.Dynamodb.NewImage
		pk, _ := img[table.PK].(*types.AttributeValueMemberS)
		sk, _ := img[table.SK].(*types.AttributeValueMemberS)
		b, _ := img["event"].(*types.AttributeValueMemberB)
		if pk == nil || sk == nil || b == nil || !strings.HasPrefix(pk.Value, events.OutboxPrefix) {
			continue
		}
		ev, err := events.DecodeEvent(b.Value)
		if err != nil {
			r.log.Error("outbox item is not a valid event; left in place", "pk", pk.Value, "id", sk.Value, "err", err)
			continue
		}
		evs = append(evs, ev)
		relayed = append(relayed, table.ImmutableDeleteWrite(table.Item{table.PK: pk.Value, table.SK: sk.Value}))
	}
	if len(evs) == 0 {
		return nil
	}
	if err := r.o.Log.Append(ctx, evs); err != nil {
		return err
	}
	if r.o.Relayed != nil {
		now := time.Now()
		ages := make([]time.Duration, len(evs))
		for i, ev := range evs {
			ages[i] = now.Sub(ev.OccurredAt.Time)
		}
		r.o.Relayed(len(evs), reads, ages)
	}
	// Appended: a failed delete leaves the item to the sweep, which appends it again (de-duplicated).
	// The deletes finish when the relay is stopping, too.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.o.Table.BatchWrite(dctx, relayed); err != nil {
		r.log.Warn("deleting relayed outbox items failed; the sweep relays them again", "err", err)
	}
	return nil
}

func (r *Relay) setTip(shard string, at bool) {
	r.mu.Lock()
	r.atTip[shard] = at
	r.mu.Unlock()
}

// caughtUp reports whether this process reads shards and read each to its newest record last time.
func (r *Relay) caughtUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.atTip {
		if !at {
			return false
		}
	}
	return len(r.atTip) > 0
}

// sweep relays, every Sweep, the outbox items its previous round saw too, when the process is
// caught up with its shards (else it starts over: a relay behind its stream is not overtaken).
func (r *Relay) sweep(ctx context.Context) {
	var seen map[string]struct{}
	for ctx.Err() == nil {
		rookery.Sleep(ctx, r.o.Sweep)
		if !r.caughtUp() {
			seen = nil
			continue
		}
		next, n, err := r.o.Outbox.Sweep(ctx, seen)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("sweeping the outbox failed", "err", err)
			}
			continue
		}
		seen = next
		if n > 0 {
			r.log.Warn("the sweep relayed outbox items the stream did not bring", "events", n)
		}
	}
}
