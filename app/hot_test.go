package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/table"
)

// countingTable counts the committed transactions that write a given item.
type countingTable struct {
	table.Table
	key    table.Key
	writes atomic.Int64
}

func (c *countingTable) TransactWrite(ctx context.Context, ws []table.Write) error {
	err := c.Table.TransactWrite(ctx, ws)
	for _, w := range ws {
		if err == nil && w.Kind == table.WriteUpdate && w.Key == c.key {
			c.writes.Add(1)
		}
	}
	return err
}

// TestHotPostCountsAreBatched applies 50 likes of one post at once, each event twice: the like
// count is exact, and it took far fewer writes of the post than likes.
func TestHotPostCountsAreBatched(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := open(t)
			log, err := embedded.Open(embedded.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { log.Close() })
			var seq atomic.Int64
			ids := func() string { return fmt.Sprintf("%020d", seq.Add(1)) }
			setup := app.New(app.Deps{Table: base, Events: log, Outbox: &events.Outbox{Table: base, Log: log}, Clock: rookery.SystemClock, IDs: ids})
			server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
			if _, _, err := setup.PutUser(server, "star", app.UserInput{Username: "star"}); err != nil {
				t.Fatal(err)
			}
			post, _, err := setup.CreatePost(rookery.WithCaller(ctx, rookery.Caller{UserID: "star"}), app.PostInput{Text: "viral"})
			if err != nil {
				t.Fatal(err)
			}
			counting := &countingTable{Table: base, key: table.Key{PK: "POST#" + post.ID, SK: "META"}}
			a := app.New(app.Deps{Table: counting, Events: log, Outbox: &events.Outbox{Table: counting, Log: log}, Clock: rookery.SystemClock, IDs: ids})

			const likes = 50
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range likes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					payload, _ := json.Marshal(app.LikePayload{PostID: post.ID, AuthorID: "star", UserID: fmt.Sprintf("fan%d", i)})
					ev := rookery.Event{ID: fmt.Sprintf("like-%03d", i), Type: app.LikeCreated, Version: 1, Key: "k", Payload: payload,
						OccurredAt: rookery.Time{Time: time.Now()}}
					<-start
					for range 2 { // every event delivered twice
						if err := a.ApplyCounts(ctx, ev); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			got, err := a.Post(server, post.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.LikeCount != likes {
				t.Fatalf("like_count = %d; want %d", got.LikeCount, likes)
			}
			if n := counting.writes.Load(); n > likes/2 {
				t.Fatalf("%d writes of the post for %d likes (%d deliveries): not batched", n, likes, 2*likes)
			} else {
				t.Logf("%d likes, %d deliveries, %d writes of the post", likes, 2*likes, n)
			}
		})
	}
}
