// Package app holds Rookery's use cases: every rule about who may do what, what a valid request
// is, and how it maps onto the table, written once above the storage interfaces. Handlers in
// httpapi decode a request, call one method here, and encode the result; backends know nothing of
// these rules.
package app

import (
	"context"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Deps are what the App works with.
type Deps struct {
	Table table.Table
	// Events is the event log (its dead-letter queue is administered here); Outbox writes events
	// atomically with the changes that cause them.
	Events events.Log
	Outbox *events.Outbox
	Clock  rookery.Clock
	IDs    rookery.IDSource
	// Timelines keeps home timelines; nil runs no fan-out (the home feed is not served).
	Timelines timeline.Store
	// CelebrityThreshold: authors with more followers are not fanned out; 0 means
	// DefaultCelebrityThreshold.
	CelebrityThreshold int
}

// App is the application: the use cases over the table and the event pipeline.
type App struct {
	table  table.Table
	events events.Log
	outbox *events.Outbox
	clock  rookery.Clock
	ids    rookery.IDSource
	hot    *hotCounters

	timelines          timeline.Store
	celebrityThreshold int
}

// New returns the App over d.
func New(d Deps) *App {
	if d.CelebrityThreshold <= 0 {
		d.CelebrityThreshold = DefaultCelebrityThreshold
	}
	return &App{table: d.Table, events: d.Events, outbox: d.Outbox, clock: d.Clock, ids: d.IDs, hot: newHotCounters(d.Table),
		timelines: d.Timelines, celebrityThreshold: d.CelebrityThreshold}
}

// caller returns the caller in ctx, or Unauthenticated.
func caller(ctx context.Context, op rookery.Op) (rookery.Caller, error) {
	c, ok := rookery.CallerFrom(ctx)
	if !ok {
		return rookery.Caller{}, rookery.E(op, rookery.Unauthenticated, "authentication required")
	}
	return c, nil
}

// actAs returns nil if the caller in ctx may act as user id: the user themself, or a server token.
func actAs(ctx context.Context, op rookery.Op, id string) error {
	c, err := caller(ctx, op)
	if err != nil {
		return err
	}
	if c.Server || c.UserID == id {
		return nil
	}
	return rookery.E(op, rookery.Forbidden, "you may act only as yourself")
}

// asServer returns nil if the caller in ctx holds a server-scope token.
func asServer(ctx context.Context, op rookery.Op) error {
	c, err := caller(ctx, op)
	if err != nil {
		return err
	}
	if !c.Server {
		return rookery.E(op, rookery.Forbidden, "this needs a server-scope token")
	}
	return nil
}
