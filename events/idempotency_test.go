package events_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table"
)

// TestTwiceProvesIdempotency shows the method every consumer's test uses: run the consumer over
// eventstest.Twice(log), so every event is delivered twice, and compare with the true result. An
// idempotent counter (it records each event it applied in the same transaction as the increment)
// stays exact; a naive one double-counts, which is what the method exists to catch.
func TestTwiceProvesIdempotency(t *testing.T) {
	ctx := context.Background()
	tab := openTable(t, "")
	l := eventstest.Twice(newLog(t))
	const n = 200
	appendN(t, l, n, 10)

	idempotent := func(ctx context.Context, ev rookery.Event) error {
		err := tab.TransactWrite(ctx, []table.Write{
			table.PutWrite(table.Item{table.PK: "APPLIED#counter", table.SK: ev.ID}, table.NotExists(table.PK)),
			table.UpdateWrite(table.Key{PK: "COUNT", SK: "idempotent"}, table.Update{Add: map[string]int64{"n": 1}}),
		})
		if rookery.IsKind(err, rookery.Conflict) {
			return nil // applied before: a redelivery changes nothing
		}
		return err
	}
	var naiveApplied atomic.Int64 // counted once the increment committed, so that the count below includes it
	naive := func(ctx context.Context, ev rookery.Event) error {
		_, err := table.Add(ctx, tab, table.Key{PK: "COUNT", SK: "naive"}, "n", 1)
		if err == nil {
			naiveApplied.Add(1)
		}
		return err
	}
	start(t, l, events.Consumer{Group: "idempotent", Handle: idempotent}, nil)
	start(t, l, events.Consumer{Group: "naive", Handle: naive}, nil)
	count := func(sk string) int64 {
		it, err := tab.Get(ctx, table.Key{PK: "COUNT", SK: sk})
		if err != nil {
			return 0
		}
		return it.Int("n")
	}
	eventually(t, "every event applied twice by the naive consumer", func() bool { return naiveApplied.Load() == 2*n })
	eventually(t, "the idempotent consumer caught up", func() bool { n, _, _ := l.Lag(ctx, "idempotent"); return n == 0 })
	if got := count("idempotent"); got != n {
		t.Fatalf("idempotent count = %d; want %d", got, n)
	}
	if got := count("naive"); got != 2*n {
		t.Fatalf("naive count = %d; the method should have exposed it as %d", got, 2*n)
	}
}
