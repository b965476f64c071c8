// Package nats is the scale-out event log: events.Log on NATS JetStream.
//
// Layout, for a deployment prefix P:
//
//	stream P_EVENTS, subjects P.events.<partition> (events by key hash) and P.replay.<group>
//	  (dead letters replayed to one group); file storage; Nats-Msg-Id de-duplication (window 10 min);
//	  events in the binary form of events.AppendEvent
//	KV bucket P_GROUPS: per group, each partition's owner and acked position, and the members'
//	  heartbeats (group.go)
//	KV bucket P_DLQ (a stream underneath): key <group>.<hex(event id)> -> dead letter (JSON)
//
// A consumer group is a set of members, one per Log (one per process) that subscribes to it. The
// members divide the group's partitions among themselves with leases in P_GROUPS; the owner of a
// partition reads it with an ordered consumer and keeps the group's position there, so the server
// tracks no acks and per-key order needs no round trip per event. Retries, the ack wait and
// delivery attempts are the owner's; the dead-letter decision is the runner's, so both backends
// dead-letter by the same rule.
package nats

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// Options configure a Log.
type Options struct {
	URL string // e.g. nats://127.0.0.1:4222
	// Prefix names the streams and subjects (one deployment, or one test); 0-9A-Za-z_ only.
	Prefix string
	// Partitions is the number of partitions of a new stream; 0 means 16.
	Partitions int
	// Replicas of the streams (1 on a single server; 3 on a cluster).
	Replicas int
	// LeaseTTL is how long a partition stays with a member of a consumer group that stopped
	// renewing its lease (a crashed process); 0 means 5 s.
	LeaseTTL time.Duration
	// Logger receives the consumer groups' warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Log is events.Log on JetStream.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	dlq    jetstream.KeyValue
	groups jetstream.KeyValue
	prefix string
	parts  int
	log    *slog.Logger

	leaseTTL time.Duration

	mu      sync.Mutex
	members map[string]*member // by group
	closed  bool
	running sync.WaitGroup // members' run goroutines
}

var _ events.Log = (*Log)(nil)

const dedupWindow = 10 * time.Minute

// Open connects and creates (or updates) the streams.
func Open(ctx context.Context, o Options) (*Log, error) {
	const op rookery.Op = "nats.Open"
	if o.Partitions <= 0 {
		o.Partitions = 16
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Prefix == "" || strings.ContainsAny(o.Prefix, ".*> ") {
		return nil, rookery.E(op, rookery.Invalid, "a prefix of letters, digits and _ is required")
	}
	nc, err := nats.Connect(o.URL, nats.Name("rookery"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, rookery.E(op, rookery.Unavailable, "cannot connect to NATS", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, rookery.E(op, rookery.Internal, err)
	}
	l := &Log{nc: nc, js: js, prefix: o.Prefix, parts: o.Partitions, log: o.Logger, leaseTTL: o.LeaseTTL, members: map[string]*member{}}
	l.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       l.streamName(),
		Subjects:   []string{o.Prefix + ".events.*", o.Prefix + ".replay.*"},
		Storage:    jetstream.FileStorage,
		Replicas:   o.Replicas,
		Duplicates: dedupWindow,
	})
	if err == nil {
		l.dlq, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: o.Prefix + "_DLQ", Storage: jetstream.FileStorage, Replicas: o.Replicas,
		})
	}
	if err == nil {
		l.groups, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: o.Prefix + "_GROUPS", Storage: jetstream.FileStorage, Replicas: o.Replicas,
		})
	}
	if err != nil {
		nc.Close()
		return nil, translate(op, err)
	}
	return l, nil
}

// Destroy deletes the streams of prefix (tests clean up with it), after the members of consumer
// groups on l have left.
func (l *Log) Destroy(ctx context.Context) error {
	l.stopMembers()
	err1 := l.js.DeleteStream(ctx, l.streamName())
	err2 := l.js.DeleteKeyValue(ctx, l.prefix+"_DLQ")
	err3 := l.js.DeleteKeyValue(ctx, l.prefix+"_GROUPS")
	return errors.Join(err1, err2, err3)
}

func translate(op rookery.Op, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected):
		return rookery.E(op, rookery.Unavailable, "NATS is unavailable", err)
	}
	return rookery.E(op, rookery.Internal, err)
}

func (l *Log) streamName() string            { return l.prefix + "_EVENTS" }
func (l *Log) eventSubject(p int) string     { return fmt.Sprintf("%s.events.%d", l.prefix, p) }
func (l *Log) replaySubject(g string) string { return l.prefix + ".replay." + g }
func dlqKey(group, id string) string         { return group + "." + hex.EncodeToString([]byte(id)) }

// Append implements events.Log: every event is published asynchronously with its id as
// Nats-Msg-Id, and Append returns once the server has stored them all.
func (l *Log) Append(ctx context.Context, evs []rookery.Event) error {
	const op rookery.Op = "nats.Append"
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	for _, ev := range evs {
		if ev.ID == "" || ev.Type == "" || ev.Key == "" {
			return rookery.E(op, rookery.Invalid, "an event needs an id, a type and a key")
		}
	}
	for _, ev := range evs {
		data, err := events.AppendEvent(nil, ev)
		if err != nil {
			return rookery.E(op, err)
		}
		f, err := l.js.PublishMsgAsync(&nats.Msg{Subject: l.eventSubject(events.Partition(ev.Key, l.parts)), Data: data}, jetstream.WithMsgID(ev.ID))
		if err != nil {
			return translate(op, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return translate(op, err)
		case <-ctx.Done():
			return translate(op, ctx.Err())
		}
	}
	return nil
}

// Subscribe implements events.Log. The subscriptions of a group on one Log share one member of the
// group (group.go), which owns some of the group's partitions and hands out their events.
func (l *Log) Subscribe(ctx context.Context, group string, opts events.SubscribeOptions) (events.Subscription, error) {
	const op rookery.Op = "nats.Subscribe"
	if err := events.CheckGroup(op, group); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, rookery.E(op, rookery.Unavailable, "the log is closed")
	}
	m := l.members[group]
	if m == nil {
		m = l.newMember(group)
		l.members[group] = m
		l.running.Add(1)
		go func() { defer l.running.Done(); m.run() }()
	}
	m.mu.Lock()
	m.refs++
	m.mu.Unlock()
	return &subscription{m: m, ackWait: opts.AckWait, held: map[*delivery]bool{}}, nil
}

// leave ends a subscription's share in m; the last one stops m, which gives its partitions back.
func (l *Log) leave(m *member) {
	l.mu.Lock()
	m.mu.Lock()
	m.refs--
	last := m.refs == 0
	m.mu.Unlock()
	if last && l.members[m.group] == m {
		delete(l.members, m.group)
	}
	l.mu.Unlock()
	if last {
		m.cancel()
		<-m.done
	}
}

// DeadLetter implements events.Log.
func (l *Log) DeadLetter(ctx context.Context, group string, d events.DeadLetter) error {
	const op rookery.Op = "nats.DeadLetter"
	if err := events.CheckGroup(op, group); err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return rookery.E(op, rookery.Invalid, err)
	}
	_, err = l.dlq.Put(ctx, dlqKey(group, d.Event.ID), b)
	return translate(op, err)
}

// DeadLetters implements events.Log.
func (l *Log) DeadLetters(ctx context.Context, group, after string, limit int) ([]events.DeadLetter, error) {
	const op rookery.Op = "nats.DeadLetters"
	if err := events.CheckGroup(op, group); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	lister, err := l.dlq.ListKeysFiltered(ctx, group+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, translate(op, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys) // hex keeps the order of the ids
	afterKey := ""
	if after != "" {
		afterKey = dlqKey(group, after)
	}
	var out []events.DeadLetter
	for _, k := range keys {
		if k <= afterKey || len(out) == limit {
			continue
		}
		e, err := l.dlq.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, translate(op, err)
		}
		var d events.DeadLetter
		if err := json.Unmarshal(e.Value(), &d); err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetterByID implements events.Log.
func (l *Log) DeadLetterByID(ctx context.Context, group, id string) (events.DeadLetter, error) {
	d, _, err := l.deadLetter(ctx, "nats.DeadLetterByID", group, id)
	return d, err
}

func (l *Log) deadLetter(ctx context.Context, op rookery.Op, group, id string) (events.DeadLetter, uint64, error) {
	if err := events.CheckGroup(op, group); err != nil {
		return events.DeadLetter{}, 0, err
	}
	e, err := l.dlq.Get(ctx, dlqKey(group, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.DeadLetter{}, 0, rookery.E(op, rookery.NotFound, "no such dead letter")
	}
	if err != nil {
		return events.DeadLetter{}, 0, translate(op, err)
	}
	var d events.DeadLetter
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return events.DeadLetter{}, 0, rookery.E(op, rookery.Internal, err)
	}
	return d, e.Revision(), nil
}

// Replay implements events.Log.
func (l *Log) Replay(ctx context.Context, group, id string) error {
	const op rookery.Op = "nats.Replay"
	d, rev, err := l.deadLetter(ctx, op, group, id)
	if err != nil {
		return err
	}
	data, err := events.AppendEvent(nil, d.Event)
	if err != nil {
		return rookery.E(op, err)
	}
	// A message id of its own: a replay must not be taken for a duplicate of the original.
	msgID := fmt.Sprintf("replay-%s-%s-%d", group, id, rev)
	if _, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.replaySubject(group), Data: data}, jetstream.WithMsgID(msgID)); err != nil {
		return translate(op, err)
	}
	return translate(op, l.dlq.Purge(ctx, dlqKey(group, id)))
}

// Drop implements events.Log.
func (l *Log) Drop(ctx context.Context, group, id string) error {
	const op rookery.Op = "nats.Drop"
	if _, _, err := l.deadLetter(ctx, op, group, id); err != nil {
		return err
	}
	return translate(op, l.dlq.Purge(ctx, dlqKey(group, id)))
}

// Lag implements events.Log. It reads the positions in the groups bucket, after this Log's own
// member of the group (if any) has written its latest acks there.
func (l *Log) Lag(ctx context.Context, group string) (int64, time.Time, error) {
	const op rookery.Op = "nats.Lag"
	if err := events.CheckGroup(op, group); err != nil {
		return 0, time.Time{}, err
	}
	l.mu.Lock()
	m := l.members[group]
	l.mu.Unlock()
	if m != nil {
		if err := m.flushNow(ctx); err != nil {
			return 0, time.Time{}, translate(op, err)
		}
	}
	var n int64
	var oldest time.Time
	for _, r := range l.partitions(group) {
		behind, first, err := l.behind(ctx, r.key, r.subject)
		if err != nil {
			return 0, time.Time{}, translate(op, err)
		}
		n += behind
		if behind > 0 && (oldest.IsZero() || first.Before(oldest)) {
			oldest = first
		}
	}
	return n, oldest, nil
}

// behind counts the events on subject after the position under key in the groups bucket, and
// returns the time the first of them was appended.
func (l *Log) behind(ctx context.Context, key, subject string) (int64, time.Time, error) {
	var st partState
	e, err := l.groups.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return 0, time.Time{}, err
	default:
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return 0, time.Time{}, err
		}
	}
	last, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && last.Sequence <= st.Seq {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	first, err := l.stream.GetMsg(ctx, st.Seq+1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return 0, time.Time{}, err
	}
	// An ephemeral consumer from there counts the rest (NumPending) without reading it.
	c, err := l.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: subject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: st.Seq + 1,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	info := c.CachedInfo()
	l.stream.DeleteConsumer(ctx, info.Name)
	return int64(info.NumPending), first.Time, nil
}

// Ping implements events.Log: the stream must answer.
func (l *Log) Ping(ctx context.Context) error {
	_, err := l.stream.Info(ctx)
	return translate("nats.Ping", err)
}

// Close implements events.Log: every member gives its partitions back first.
func (l *Log) Close() error {
	l.stopMembers()
	l.nc.Close()
	return nil
}

// stopMembers ends every subscription on l and waits until their members have given their
// partitions back.
func (l *Log) stopMembers() {
	l.mu.Lock()
	l.closed = true
	for _, m := range l.members {
		m.cancel()
	}
	l.members = map[string]*member{}
	l.mu.Unlock()
	l.running.Wait()
}
