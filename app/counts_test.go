package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testtable"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// backends opens a table of each backend on the system clock; backendsAt on a clock of the test's.
var backends = map[string]func(t *testing.T) table.Table{
	"pebble":   func(t *testing.T) table.Table { return backendsAt["pebble"](t, rookery.SystemClock) },
	"dynamodb": func(t *testing.T) table.Table { return backendsAt["dynamodb"](t, rookery.SystemClock) },
}

var backendsAt = map[string]func(t *testing.T, clock rookery.Clock) table.Table{
	"pebble":   func(t *testing.T, clock rookery.Clock) table.Table { return testtable.Pebble(t, app.Schema, clock) },
	"dynamodb": func(t *testing.T, clock rookery.Clock) table.Table { return testtable.Dynamo(t, app.Schema, clock) },
}

// TestCountsAreExactUnderConcurrencyAndRedelivery hammers follows, unfollows, likes and unlikes from many
// goroutines while the counters consumer runs over a log that delivers every event twice; once the
// pipeline has drained, every user's follower_count and following_count equals the true number of
// edges.
func TestCountsAreExactUnderConcurrencyAndRedelivery(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tab := open(t)
			w := newTwiceWorld(t, app.Deps{Table: tab})
			a := w.a
			server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})

			const users = 8
			posts := make([]string, users)
			for i := range users {
				if _, _, err := a.PutUser(server, fmt.Sprintf("u%d", i), app.UserInput{Username: fmt.Sprintf("user%d", i)}); err != nil {
					t.Fatal(err)
				}
				as := rookery.WithCaller(ctx, rookery.Caller{UserID: fmt.Sprintf("u%d", i)})
				p, _, err := a.CreatePost(as, app.PostInput{Text: "post"})
				if err != nil {
					t.Fatal(err)
				}
				posts[i] = p.ID
			}
			pipeline := w.run(t)

			ops := 400
			if name == "dynamodb" {
				ops = 150 // DynamoDB Local is slow; the races are the same
			}
			var hammer sync.WaitGroup
			for w := range 6 {
				hammer.Add(1)
				go func() {
					defer hammer.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					for range ops / 6 {
						from, to := r.IntN(users), r.IntN(users-1)
						if to >= from {
							to++
						}
						id, target := fmt.Sprintf("u%d", from), fmt.Sprintf("u%d", to)
						var err error
						switch r.IntN(6) {
						case 0, 1:
							_, err = a.Follow(server, id, target)
						case 2:
							err = a.Unfollow(server, id, target)
						case 3, 4:
							err = a.LikePost(server, posts[to], id)
						default:
							err = a.UnlikePost(server, posts[to], id)
						}
						if err != nil && !rookery.IsKind(err, rookery.Unavailable) {
							t.Errorf("%s -> %s: %v", id, target, err)
						}
					}
				}()
			}
			hammer.Wait()

			pipeline.Drain(t, 60*time.Second) // the outbox is empty and every group has handled everything
			followers, following := make([]int64, users), make([]int64, users)
			edges := 0
			for i := range users {
				for j := range users {
					if i == j {
						continue
					}
					if _, err := a.FollowedAt(server, fmt.Sprintf("u%d", i), fmt.Sprintf("u%d", j)); err == nil {
						following[i]++
						followers[j]++
						edges++
					} else if !rookery.IsKind(err, rookery.NotFound) {
						t.Fatal(err)
					}
				}
			}
			likes := 0
			for i := range users {
				p, err := a.Post(server, posts[i])
				if err != nil {
					t.Fatal(err)
				}
				var want int64
				for j := range users {
					if _, err := tab.Get(ctx, table.Key{PK: "POST#" + posts[i], SK: fmt.Sprintf("LIKE#u%d", j)}); err == nil {
						want++
					}
				}
				likes += int(want)
				if p.LikeCount != want {
					t.Errorf("post of u%d: like_count %d (true %d)", i, p.LikeCount, want)
				}
				u, err := a.User(server, fmt.Sprintf("u%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if u.FollowerCount != followers[i] || u.FollowingCount != following[i] {
					t.Errorf("u%d: follower_count %d (true %d), following_count %d (true %d)", i, u.FollowerCount, followers[i], u.FollowingCount, following[i])
				}
			}
			if dl, _ := w.log.DeadLetters(ctx, app.CountersGroup, "", 10); len(dl) != 0 {
				t.Fatalf("dead letters: %+v", dl)
			}
			t.Logf("%d follow edges and %d likes after %d concurrent operations, every event delivered twice: all counts exact", edges, likes, ops)
		})
	}
}

// twiceWorld is an App whose events go through an in-memory log that delivers every event twice
// (eventstest.Twice), for the tests that prove the consumers idempotent.
type twiceWorld struct {
	a      *app.App
	outbox *events.Outbox
	log    events.Log
}

// newTwiceWorld returns the App over d (Table set; Events, Outbox, Clock and IDs are filled in).
func newTwiceWorld(t *testing.T, d app.Deps) *twiceWorld {
	t.Helper()
	raw, err := embedded.Open(embedded.Options{InMemory: true, Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	w := &twiceWorld{log: eventstest.Twice(raw)}
	w.outbox = &events.Outbox{Table: d.Table, Log: w.log, Shards: 4, Poll: 10 * time.Millisecond}
	var seq atomic.Int64
	d.Events, d.Outbox, d.Clock = w.log, w.outbox, rookery.SystemClock
	d.IDs = func() string { return fmt.Sprintf("%020d", seq.Add(1)) }
	w.a = app.New(d)
	return w
}

// run starts the relay and the App's consumers.
func (w *twiceWorld) run(t *testing.T) *eventstest.Pipeline {
	return eventstest.RunPipeline(t, w.outbox, w.log, w.a.Consumers())
}
