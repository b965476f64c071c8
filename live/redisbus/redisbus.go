// Package redisbus is the bus of a scaled-out deployment over Redis pub/sub, for deployments whose
// event log is not NATS (SNS/SQS on AWS) but which run Redis for their timelines: each published
// stream event goes to the channel of its user, and each process subscribes to the channels of the
// users with a stream open on it. Pub/sub delivers at most once; a stream notices what it missed at
// its next event or heartbeat and reads it from the stream log, so nothing here is kept.
package redisbus

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/live"
)

// Options configure a Bus.
type Options struct {
	Prefix string       // of the channels: <prefix>:live:<user>
	Logger *slog.Logger // nil logs nothing
}

// Bus is a live bus over Redis pub/sub.
type Bus struct {
	rdb    redis.UniversalClient
	ps     *redis.PubSub
	prefix string
	hub    *live.Hub
	log    *slog.Logger
	done   chan struct{}

	deliveries chan *redis.Message

	mu      sync.Mutex
	waiting map[string]chan struct{} // channel -> closed when Redis confirms the subscription
}

// Open subscribes through rdb (which the caller closes after the Bus) to the channels of hub's
// users (hub.Watch).
func Open(rdb redis.UniversalClient, o Options, hub *live.Hub) *Bus {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bus{rdb: rdb, ps: rdb.Subscribe(context.Background()), prefix: o.Prefix, hub: hub, log: o.Logger,
		done: make(chan struct{}), waiting: map[string]chan struct{}{}, deliveries: make(chan *redis.Message, 4096)}
	hub.Watch = b.watch
	go b.run()
	go b.deliver()
	return b
}

func (b *Bus) channel(user string) string { return b.prefix + ":live:" + user }

// A message is "<seq> <type>\n<data>".
func encode(seq uint64, typ string, data []byte) []byte {
	out := strconv.AppendUint(nil, seq, 10)
	out = append(out, ' ')
	out = append(out, typ...)
	out = append(out, '\n')
	return append(out, data...)
}

func decode(s string) (seq uint64, typ string, data []byte, ok bool) {
	head, body, found := strings.Cut(s, "\n")
	if !found {
		return 0, "", nil, false
	}
	num, typ, found := strings.Cut(head, " ")
	seq, err := strconv.ParseUint(num, 10, 64)
	if !found || err != nil {
		return 0, "", nil, false
	}
	return seq, typ, []byte(body), true
}

// Publish implements app.StreamPublisher. An event that cannot be sent is left to the streams'
// gap detection.
func (b *Bus) Publish(user string, seq uint64, typ string, data []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.rdb.Publish(ctx, b.channel(user), encode(seq, typ, data)).Err(); err != nil {
		b.log.Warn("publishing a stream event", "err", err)
	}
}

func (b *Bus) run() {
	defer close(b.done)
	defer close(b.deliveries)
	for msg := range b.ps.ChannelWithSubscriptions() {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.mu.Lock()
				if w := b.waiting[m.Channel]; w != nil {
					close(w)
					delete(b.waiting, m.Channel)
				}
				b.mu.Unlock()
			}
		case *redis.Message:
			select {
			case b.deliveries <- m:
			default: // a stream notices the gap and reads its log
			}
		}
	}
}

// deliver hands messages to the hub. It is not run's loop: the hub calls watch under its lock, and
// watch waits for run to see Redis's confirmation.
func (b *Bus) deliver() {
	for m := range b.deliveries {
		seq, typ, data, ok := decode(m.Payload)
		if !ok {
			continue
		}
		user := strings.TrimPrefix(m.Channel, b.prefix+":live:")
		b.hub.Deliver(user, live.Message{Seq: seq, Type: typ, Data: data})
	}
}

// watch subscribes to user's channel and waits until Redis confirms it: the stream reads its log
// after subscribing, so nothing published after that read is missed.
func (b *Bus) watch(user string, on bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch := b.channel(user)
	if !on {
		if err := b.ps.Unsubscribe(ctx, ch); err != nil {
			b.log.Warn("unsubscribing from a user's stream events", "user", user, "err", err)
		}
		return
	}
	w := make(chan struct{})
	b.mu.Lock()
	b.waiting[ch] = w
	b.mu.Unlock()
	if err := b.ps.Subscribe(ctx, ch); err != nil {
		b.log.Warn("subscribing to a user's stream events", "user", user, "err", err)
		return
	}
	select {
	case <-w:
	case <-ctx.Done():
		b.log.Warn("Redis did not confirm a subscription to a user's stream events", "user", user)
	}
}

// Ping reports whether Redis answers.
func (b *Bus) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }

// Close ends the subscriptions.
func (b *Bus) Close() error {
	err := b.ps.Close()
	<-b.done
	return err
}
