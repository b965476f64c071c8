// Package natsbus is the bus of a scaled-out deployment over NATS core subjects, which the
// deployment's event log already runs on: each published stream event goes to the subject of its
// user, and each process subscribes to the subjects of the users with a stream open on it. Core
// NATS delivers at most once; a stream notices what it missed at its next event or heartbeat and
// reads it from the stream log, so nothing here is kept.
package natsbus

import (
	"log/slog"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/rookery/rookery/live"
)

// Options configure a Bus.
type Options struct {
	URL    string
	Prefix string       // of the subjects: <prefix>.live.<user>
	Logger *slog.Logger // nil logs nothing
}

// Bus is a live bus over NATS.
type Bus struct {
	nc     *nats.Conn
	prefix string
	hub    *live.Hub
	log    *slog.Logger

	mu   sync.Mutex
	subs map[string]*nats.Subscription
}

// Open connects to NATS and takes the subscriptions of hub's users (hub.Watch).
func Open(o Options, hub *live.Hub) (*Bus, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(o.URL, nats.Name("rookery-live"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	b := &Bus{nc: nc, prefix: o.Prefix, hub: hub, log: o.Logger, subs: map[string]*nats.Subscription{}}
	hub.Watch = b.watch
	return b, nil
}

// subject is user's subject (user ids are letters, digits, '_' and '-': valid subject tokens).
func (b *Bus) subject(user string) string { return b.prefix + ".live." + user }

// Publish implements app.StreamPublisher. An event that cannot be sent is left to the streams'
// gap detection.
func (b *Bus) Publish(user string, seq uint64, typ string, data []byte) {
	m := nats.NewMsg(b.subject(user))
	m.Header.Set("Seq", strconv.FormatUint(seq, 10))
	m.Header.Set("Type", typ)
	m.Data = data
	if err := b.nc.PublishMsg(m); err != nil {
		b.log.Warn("publishing a stream event", "err", err)
	}
}

func (b *Bus) watch(user string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !on {
		if s := b.subs[user]; s != nil {
			_ = s.Unsubscribe()
			delete(b.subs, user)
		}
		return
	}
	s, err := b.nc.Subscribe(b.subject(user), func(m *nats.Msg) {
		seq, err := strconv.ParseUint(m.Header.Get("Seq"), 10, 64)
		if err != nil {
			return
		}
		b.hub.Deliver(user, live.Message{Seq: seq, Type: m.Header.Get("Type"), Data: m.Data})
	})
	if err != nil {
		b.log.Warn("subscribing to a user's stream events", "user", user, "err", err)
		return
	}
	b.subs[user] = s
	// The stream reads its log after subscribing: once the server has the subscription, nothing
	// published after that read is missed.
	if err := b.nc.Flush(); err != nil {
		b.log.Warn("subscribing to a user's stream events", "user", user, "err", err)
	}
}

// Ping reports whether the connection is up.
func (b *Bus) Ping() error {
	if !b.nc.IsConnected() {
		return nats.ErrConnectionClosed
	}
	return nil
}

// Close drains the connection.
func (b *Bus) Close() error { return b.nc.Drain() }
