package eventstest

import (
	"context"
	"sync"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// Twice wraps a log so that every event a subscription acks is delivered to it once more (with the
// next attempt number) before anything else: the redelivery that at-least-once allows, made
// certain. Consumer tests run their consumer over Twice(log) and check that the result equals one
// delivery's — the proof that the consumer is idempotent.
func Twice(l events.Log) events.Log { return twiceLog{l} }

type twiceLog struct{ events.Log }

func (t twiceLog) Subscribe(ctx context.Context, group string, opts events.SubscribeOptions) (events.Subscription, error) {
	s, err := t.Log.Subscribe(ctx, group, opts)
	if err != nil {
		return nil, err
	}
	return &twiceSub{Subscription: s}, nil
}

type twiceSub struct {
	events.Subscription
	mu    sync.Mutex
	again []redelivery
}

type redelivery struct {
	ev      rookery.Event
	attempt int
}

func (s *twiceSub) Next(ctx context.Context) (events.Delivery, error) {
	s.mu.Lock()
	if len(s.again) > 0 {
		r := s.again[0]
		s.again = s.again[1:]
		s.mu.Unlock()
		return &duplicate{r: r}, nil
	}
	s.mu.Unlock()
	d, err := s.Subscription.Next(ctx)
	if err != nil {
		return nil, err
	}
	return &first{Delivery: d, s: s}, nil
}

// first is an original delivery; its ack queues the duplicate.
type first struct {
	events.Delivery
	s *twiceSub
}

func (f *first) Ack(ctx context.Context) error {
	if err := f.Delivery.Ack(ctx); err != nil {
		return err
	}
	f.s.mu.Lock()
	f.s.again = append(f.s.again, redelivery{ev: f.Event(), attempt: f.Attempt() + 1})
	f.s.mu.Unlock()
	return nil
}

// duplicate is the second delivery; acking or naking it changes nothing in the log.
type duplicate struct{ r redelivery }

func (d *duplicate) Event() rookery.Event                     { return d.r.ev }
func (d *duplicate) Attempt() int                             { return d.r.attempt }
func (d *duplicate) Ack(context.Context) error                { return nil }
func (d *duplicate) Nak(context.Context, time.Duration) error { return nil }

// First passes on whether the log knows this to be the event's first delivery (the duplicate is
// not one), so that a consumer's idempotency is proved with the writes it makes on a first
// delivery (events.IsFirstDelivery) too.
func (f *first) First() bool {
	fd, ok := f.Delivery.(events.FirstDelivery)
	return ok && fd.First()
}
