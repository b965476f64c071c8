// Package events is Rookery's event pipeline: the event log interface (with an embedded backend in
// events/embedded and, for scale-out, NATS JetStream), the transactional outbox that feeds it, and
// the runner that every consumer (fan-out, counters, notifications, ...) plugs into.
//
// Guarantees, end to end: an event is written in the same atomic write as the change that causes
// it (the outbox), so a change is never acknowledged without its event; the relay moves it to the
// log at least once; the log delivers it to every consumer group at least once, in order per key;
// consumers are idempotent, so a redelivery changes nothing.
package events

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/rookery/rookery"
)

// Log is a durable event log, partitioned by event key, read by consumer groups with committed
// positions. Implementations are safe for concurrent use.
type Log interface {
	// Append durably appends evs (when it returns nil, they survive a crash). Events with the same
	// Key go to the same partition in the order given. An event whose ID the log has already
	// appended is not appended again (de-duplication by ID), so appending is idempotent.
	Append(ctx context.Context, evs []rookery.Event) error

	// Subscribe joins consumer group (created on first use, starting at the beginning of the log).
	// Every group sees every event; the subscriptions of one group share its partitions, so each
	// event goes to one of them. Within a partition a group has at most one event in flight: the next
	// is delivered only once the previous is acked (this is what keeps per-key order).
	Subscribe(ctx context.Context, group string, opts SubscribeOptions) (Subscription, error)

	// DeadLetter stores d in group's dead-letter queue. The runner calls it, then acks the delivery.
	DeadLetter(ctx context.Context, group string, d DeadLetter) error
	// DeadLetters lists group's dead-letter queue, oldest first, up to limit entries after the
	// entry with id after ("" from the start).
	DeadLetters(ctx context.Context, group string, after string, limit int) ([]DeadLetter, error)
	// DeadLetterByID returns group's dead letter of event id; an unknown id is NotFound.
	DeadLetterByID(ctx context.Context, group, id string) (DeadLetter, error)
	// Replay moves the dead letter with event id out of the queue and delivers its event to group
	// again (to that group only). An unknown id is NotFound.
	Replay(ctx context.Context, group, id string) error
	// Drop removes the dead letter with event id. An unknown id is NotFound.
	Drop(ctx context.Context, group, id string) error

	// Lag says how far group is behind: events appended but not yet acked, and the time the oldest
	// of them was appended (zero if none). A log that learns an event's time only by receiving it
	// (SNS/SQS) may give the count before the time: zero until a receive has brought the event.
	Lag(ctx context.Context, group string) (events int64, oldest time.Time, err error)

	// Ping reports whether the log answers (for /readyz).
	Ping(ctx context.Context) error

	// Close releases the log; subscriptions end with an Unavailable error.
	Close() error
}

// SubscribeOptions tune a subscription.
type SubscribeOptions struct {
	// AckWait is how long a delivery may stay unacknowledged before it is delivered again (the
	// consumer is presumed dead). 0 means 30 seconds.
	AckWait time.Duration
}

// Subscription receives a group's deliveries.
type Subscription interface {
	// Next blocks until a delivery is available or ctx ends (ctx's error, Kind Unavailable).
	Next(ctx context.Context) (Delivery, error)
	// Close leaves the group; unacked deliveries are delivered again to the group.
	Close() error
}

// Delivery is one delivery of an event to a group.
type Delivery interface {
	Event() rookery.Event
	// Attempt counts deliveries of this event to this group: 1 the first time.
	Attempt() int
	// Ack marks the event processed for the group; it is not delivered to the group again.
	Ack(ctx context.Context) error
	// Nak asks for the event to be delivered again after delay (a retry).
	Nak(ctx context.Context, delay time.Duration) error
}

// A FirstDelivery is a Delivery that may know that its event was never delivered to its group
// before (a log keeping its groups' deliveries in the consumers' process: events/embedded). For a
// Consumer with FirstDeliveries set, the Runner tells the handler (IsFirstDelivery) and keeps the
// event's redeliveries from running beside it.
type FirstDelivery interface {
	Delivery
	// First reports whether no earlier delivery of the event to the group can have been handled,
	// in this process or before it started.
	First() bool
}

type firstKey struct{}

// IsFirstDelivery reports whether ctx is a handler's whose event no handling of its group came
// before, nor runs beside it (FirstDelivery): an applied record the group keeps for the event
// cannot exist yet, so the handler may write it without reading for it first. Always false for a
// log that cannot tell, and outside a handler.
func IsFirstDelivery(ctx context.Context) bool {
	v, _ := ctx.Value(firstKey{}).(bool)
	return v
}

// withFirstDelivery marks ctx for IsFirstDelivery.
func withFirstDelivery(ctx context.Context) context.Context {
	return context.WithValue(ctx, firstKey{}, true)
}

// DeadLetter is an event a consumer group gave up on, with the reason.
type DeadLetter struct {
	Event    rookery.Event `json:"event"`
	Error    string        `json:"error"`
	Attempts int           `json:"attempts"`
	FailedAt rookery.Time  `json:"failed_at"`
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o SubscribeOptions) WithDefaults() SubscribeOptions {
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	return o
}

// CheckGroup returns an Invalid error unless group is a consumer group's name: 1 to 64 characters
// of A-Z, a-z, 0-9, _ and - (every log keeps it in keys or subjects as it is).
func CheckGroup(op rookery.Op, group string) error {
	if !rookery.ValidUserID(group) { // the same alphabet
		return rookery.E(op, rookery.Invalid, "a group name is 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
	}
	return nil
}

// DefaultAckWait is the AckWait of a zero SubscribeOptions.
const DefaultAckWait = 30 * time.Second

// Partition returns the partition of n that events with key belong to. Every backend uses it, so a
// key's partition does not depend on the backend.
func Partition(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
