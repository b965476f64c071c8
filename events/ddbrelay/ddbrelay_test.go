package ddbrelay_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/ddbrelay"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
)

// A DynamoDB Local of its own, not the one make test shares: DynamoDB Local slows down as stream
// records pile up, and these tests write them.
func TestMain(m *testing.M) {
	os.Unsetenv(dynamotest.EnvEndpoint)
	dynamotest.Main(m)
}

var ctx = context.Background()

// setup is a table on DynamoDB Local with its stream, an outbox on it, and an in-memory log.
type setup struct {
	name   string
	db     *dynamo.DB
	outbox *events.Outbox
	log    events.Log
}

func newSetup(t testing.TB) *setup {
	t.Helper()
	client := dynamotest.Client(t)
	name := dynamotest.NewTable(t, client, table.Schema{}, dynamo.WithStream())
	db, err := dynamo.New(client, dynamo.Options{Table: name, Clock: rookery.SystemClock, CursorKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := embedded.Open(embedded.Options{InMemory: true, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &setup{name: name, db: db, outbox: &events.Outbox{Table: db, Log: l}, log: l}
}

// run starts a relay named owner until the returned stop is called.
func (s *setup) run(t testing.TB, owner string, ttl time.Duration) (stop func()) {
	return s.runWith(t, ddbrelay.Options{Owner: owner, LeaseTTL: ttl})
}

// runWith starts a relay with o (its clients, table, outbox and log are the setup's).
func (s *setup) runWith(t testing.TB, o ddbrelay.Options) (stop func()) {
	t.Helper()
	streams, err := dynamo.NewStreamsClient(ctx, dynamo.ClientOptions{Endpoint: dynamotest.Endpoint(t), Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	o.DynamoDB, o.Streams, o.TableName, o.Table, o.Outbox, o.Log = dynamotest.Client(t), streams, s.name, s.db, s.outbox, s.log
	if o.Sweep == 0 {
		o.Sweep = 2 * time.Second
	}
	r, err := ddbrelay.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(c); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// write commits n events (keys k0..k6) through the outbox, each in its own transaction.
func (s *setup) write(t *testing.T, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		ev := rookery.Event{ID: fmt.Sprintf("e%05d", i), Type: "T", Version: 1, Key: fmt.Sprintf("k%d", i%7),
			OccurredAt: rookery.Time{Time: time.Now()}, Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		w, err := s.outbox.Write(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
}

// consume reads n distinct events from the log in group g, checking order per key.
func (s *setup) consume(t *testing.T, g string, n int) {
	t.Helper()
	sub, err := s.log.Subscribe(ctx, g, events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	last := map[string]string{}
	seen := map[string]bool{}
	for len(seen) < n {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		d, err := sub.Next(c)
		cancel()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(seen), n, err)
		}
		ev := d.Event()
		if prev, ok := last[ev.Key]; ok && ev.ID < prev {
			t.Fatalf("key %s: %s after %s", ev.Key, ev.ID, prev)
		}
		last[ev.Key] = ev.ID
		seen[ev.ID] = true
		d.Ack(ctx)
	}
}

func (s *setup) waitEmpty(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := s.outbox.Pending(ctx, 10)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox still holds %d events (%v)", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Events written while the relay runs reach the log in order per key, and their outbox items are
// deleted; what was in the outbox before the relay's first start is relayed by its sweep.
func TestRelay(t *testing.T) {
	s := newSetup(t)
	s.write(t, 0, 20) // before the first start: the sweep's
	s.run(t, "a", 0)
	s.write(t, 20, 180)
	s.consume(t, "g", 200)
	s.waitEmpty(t)
}

// A relay that stops leaves its shards to another, which goes on from the checkpoint: every event
// reaches the log (the log drops what is appended twice).
func TestTakeOver(t *testing.T) {
	s := newSetup(t)
	stopA := s.run(t, "a", 2*time.Second)
	s.write(t, 0, 50)
	s.consume(t, "g", 50)
	stopA()
	s.write(t, 50, 50) // nobody relays them yet
	s.run(t, "b", 2*time.Second)
	s.consume(t, "g2", 100)
	s.waitEmpty(t)
}
