package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/internal/testtable"
)

// TestIdempotencyKeyInFlight: while the first request with a key runs, the same request again is
// a Conflict that says when to retry (the SDKs retry on it); the key with another body is a
// Conflict without one (retrying cannot mend it); once the first finished, the retry replays it.
func TestIdempotencyKeyInFlight(t *testing.T) {
	clock := &testClock{now: time.Now()}
	a := app.New(app.Deps{Table: testtable.FromEnv(t, app.Schema, clock), Clock: clock, IDs: func() string { return "x" }})
	ctx := rookery.WithCaller(context.Background(), rookery.Caller{UserID: "ann"})
	body := []byte(`{"text":"once"}`)

	if replay, err := a.BeginIdempotent(ctx, "k1", body); replay != nil || err != nil {
		t.Fatalf("the first request: %v, %v; want it to run", replay, err)
	}
	_, err := a.BeginIdempotent(ctx, "k1", body)
	if d, ok := rookery.RetryAfterOf(err); !rookery.IsKind(err, rookery.Conflict) || !ok || d != time.Second {
		t.Fatalf("the same request while the first runs: %v (retry after %v, %v); want a Conflict to retry in 1s", err, d, ok)
	}
	_, err = a.BeginIdempotent(ctx, "k1", []byte(`{"text":"other"}`))
	if _, ok := rookery.RetryAfterOf(err); !rookery.IsKind(err, rookery.Conflict) || ok {
		t.Fatalf("another body: %v (a retry hint: %v); want a Conflict without one", err, ok)
	}
	if err := a.FinishIdempotent(ctx, "k1", 201, []byte(`{"id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	if replay, err := a.BeginIdempotent(ctx, "k1", body); err != nil || replay == nil || replay.Status != 201 || string(replay.Body) != `{"id":"p1"}` {
		t.Fatalf("the retry after the first finished: %+v, %v; want its result", replay, err)
	}
}
