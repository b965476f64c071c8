package app_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
)

// BenchmarkDynamoCost reports the DynamoDB capacity units each operation costs end to end: the
// request and everything the pipeline does because of it (outbox relay, fan-out, cleanup,
// counters, notifications), measured on DynamoDB Local, which reports consumed capacity like
// DynamoDB. Figures beside seed 004's estimates are in docs/performance.md.
//
//	go test -run '^$' -bench DynamoCost -benchtime 5x ./app
//
// Each operation is measured as rookery serve runs on DynamoDB (reads=served: copies of posts and
// authors in the cache, follow edges read with a query) and, beside it, with every item read from
// the table one by one (reads=items, as before those).
func BenchmarkDynamoCost(b *testing.B) {
	b.Run("reads=items", func(b *testing.B) { dynamoCosts(b, func(*app.Deps) {}) })
	b.Run("reads=served", func(b *testing.B) {
		dynamoCosts(b, func(d *app.Deps) { d.PostCacheTTL, d.BilledReads = app.DefaultPostCacheTTL, true })
	})
}

func dynamoCosts(b *testing.B, reads func(*app.Deps)) {
	client := dynamotest.Client(b)
	var mu sync.Mutex
	var rcu, wcu float64
	db, err := dynamo.New(client, dynamo.Options{Table: dynamotest.NewTable(b, client, app.Schema), Schema: app.Schema,
		Clock: rookery.SystemClock, CursorKey: []byte("k"), Capacity: func(_ string, r, w float64) {
			mu.Lock()
			rcu, wcu = rcu+r, wcu+w
			mu.Unlock()
		}})
	if err != nil {
		b.Fatal(err)
	}
	// DynamoDB Local reports 4 WCU for a transaction of 100 puts; DynamoDB charges 2 WCU per item
	// written in a transaction (up to 1 KB) and 1 per index entry it changes. So transactions are
	// costed from their writes (txTable), and the other calls by what DynamoDB Local reports.
	tx := &txTable{Table: db}
	w := newBenchWorldOn(b, tx, "table", 0, reads)
	w.run(b)
	const followers = 100
	w.users(b, "author", 1)
	for _, f := range w.users(b, "f", followers) {
		if _, err := w.a.Follow(server, f, "author0"); err != nil {
			b.Fatal(err)
		}
		if _, err := w.a.Feed(as(f), "", 20); err != nil { // the timeline exists
			b.Fatal(err)
		}
	}
	for i := range 25 {
		if _, _, err := w.a.CreatePost(as("author0"), app.PostInput{Text: fmt.Sprintf("post %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	// A reader who follows 20 authors, each of whom posted once: a page of 20 authors.
	w.users(b, "reader", 1)
	if _, err := w.a.Feed(as("reader0"), "", 20); err != nil {
		b.Fatal(err)
	}
	for _, a := range w.users(b, "many", 20) {
		if _, err := w.a.Follow(server, "reader0", a); err != nil {
			b.Fatal(err)
		}
		if _, _, err := w.a.CreatePost(as(a), app.PostInput{Text: "one post"}); err != nil {
			b.Fatal(err)
		}
	}
	w.drain(b)
	snapshot := func() (float64, float64) {
		mu.Lock()
		defer mu.Unlock()
		reported := db.Consumed()["TransactWriteItems"].Write
		return rcu, wcu - reported + tx.wcu()
	}
	// measure runs prepare (not counted), then op and the pipeline's work after it (counted).
	measure := func(name string, prepare, op func(i int)) {
		b.Run(name, func(b *testing.B) {
			var r, wr float64
			for i := range b.N {
				if prepare != nil {
					prepare(i)
					w.drain(b)
				}
				r0, w0 := snapshot()
				op(i)
				w.drain(b)
				r1, w1 := snapshot()
				r, wr = r+r1-r0, wr+w1-w0
			}
			b.ReportMetric(r/float64(b.N), "RCU/op")
			b.ReportMetric(wr/float64(b.N), "WCU/op")
		})
	}
	measure("feed page of 20", nil, func(int) {
		if p, err := w.a.Feed(as("f1"), "", 20); err != nil || len(p.Items) != 20 {
			b.Fatal(len(p.Items), err)
		}
	})
	measure("feed page of 20 by 20 authors", nil, func(int) {
		if p, err := w.a.Feed(as("reader0"), "", 20); err != nil || len(p.Items) != 20 {
			b.Fatal(len(p.Items), err)
		}
	})
	post := func(text string) string {
		p, _, err := w.a.CreatePost(as("author0"), app.PostInput{Text: text})
		if err != nil {
			b.Fatal(err)
		}
		return p.ID
	}
	measure(fmt.Sprintf("post fanned out to %d followers", followers), nil, func(i int) { post(fmt.Sprintf("new %d", i)) })
	var target string
	measure(fmt.Sprintf("delete of a post held by %d timelines", followers+1),
		func(i int) { target = post(fmt.Sprintf("to delete %d", i)) },
		func(int) {
			if err := w.a.DeletePost(as("author0"), target); err != nil {
				b.Fatal(err)
			}
		})
	measure("like", func(i int) { target = post(fmt.Sprintf("to like %d", i)) }, func(int) {
		if err := w.a.LikePost(as("f2"), target, "f2"); err != nil {
			b.Fatal(err)
		}
	})
}

// txTable estimates what DynamoDB charges for transactions: 2 WCU per written item of up to 1 KB
// (more for larger ones) and 1 WCU per secondary-index entry a put writes.
type txTable struct {
	table.Table
	mu    sync.Mutex
	units float64
}

func (t *txTable) TransactWrite(ctx context.Context, writes []table.Write) error {
	err := t.Table.TransactWrite(ctx, writes)
	if err != nil {
		return err
	}
	var u float64
	for _, w := range writes {
		if w.Kind == table.WriteCheck {
			continue
		}
		size := 1.0
		if w.Kind == table.WritePut {
			size = math.Ceil(float64(table.ItemSize(w.Item)) / 1024)
			for _, ix := range app.Schema.Indexes {
				if _, ok := w.Item[ix.PK]; ok {
					u++
				}
			}
		}
		u += 2 * size
	}
	t.mu.Lock()
	t.units += u
	t.mu.Unlock()
	return nil
}

func (t *txTable) wcu() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.units
}
