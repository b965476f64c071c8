package table

import (
	"context"
	"time"
)

// Observer is told the duration and outcome of every table operation ("Get", "Query", ...).
type Observer func(op string, took time.Duration, err error)

// Observed returns t with every operation reported to observe. It changes no outcome: errors and
// results pass through unchanged, and observe is called after each operation returns.
func Observed(t Table, observe Observer) Table { return &observed{t: t, obs: observe} }

type observed struct {
	t   Table
	obs Observer
}

func (o *observed) done(op string, start time.Time, err error) { o.obs(op, time.Since(start), err) }

func (o *observed) Get(ctx context.Context, k Key) (it Item, err error) {
	defer func(start time.Time) { o.done("Get", start, err) }(time.Now())
	return o.t.Get(ctx, k)
}

func (o *observed) BatchGet(ctx context.Context, keys []Key) (items []Item, err error) {
	defer func(start time.Time) { o.done("BatchGet", start, err) }(time.Now())
	return o.t.BatchGet(ctx, keys)
}

func (o *observed) Put(ctx context.Context, item Item, conds ...Cond) (err error) {
	defer func(start time.Time) { o.done("Put", start, err) }(time.Now())
	return o.t.Put(ctx, item, conds...)
}

func (o *observed) Update(ctx context.Context, k Key, u Update, conds ...Cond) (it Item, err error) {
	defer func(start time.Time) { o.done("Update", start, err) }(time.Now())
	return o.t.Update(ctx, k, u, conds...)
}

func (o *observed) Delete(ctx context.Context, k Key, conds ...Cond) (err error) {
	defer func(start time.Time) { o.done("Delete", start, err) }(time.Now())
	return o.t.Delete(ctx, k, conds...)
}

func (o *observed) Query(ctx context.Context, q Query) (p Page, err error) {
	defer func(start time.Time) { o.done("Query", start, err) }(time.Now())
	return o.t.Query(ctx, q)
}

func (o *observed) TransactWrite(ctx context.Context, writes []Write) (err error) {
	defer func(start time.Time) { o.done("TransactWrite", start, err) }(time.Now())
	return o.t.TransactWrite(ctx, writes)
}

func (o *observed) BatchWrite(ctx context.Context, writes []Write) (err error) {
	defer func(start time.Time) { o.done("BatchWrite", start, err) }(time.Now())
	return o.t.BatchWrite(ctx, writes)
}

func (o *observed) Ping(ctx context.Context) error { return o.t.Ping(ctx) }
func (o *observed) Close() error                   { return o.t.Close() }
