// Package app holds Rookery's use cases: every rule about who may do what, what a valid request
// is, and how it maps onto the table, written once above the storage interfaces. Handlers in
// httpapi decode a request, call one method here, and encode the result; backends know nothing of
// these rules.
package app

import (
	"context"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// App is the application: the use cases over one table.
type App struct {
	table table.Table
	clock rookery.Clock
}

// New returns the App over t. clock tells the time of every write.
func New(t table.Table, clock rookery.Clock) *App {
	return &App{table: t, clock: clock}
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
