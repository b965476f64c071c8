package sqs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/events/sqs"
	"github.com/rookery/rookery/events/sqs/sqstest"
	"github.com/rookery/rookery/internal/awsconf"
)

func TestMain(m *testing.M) { sqstest.Main(m) }

// conformanceGroups are the groups the conformance suite uses: a group sees the events published
// after its queue exists, so they are created before the suite appends (as rookery migrate does).
var conformanceGroups = []string{"order", "fanout", "counters", "late", "shared", "nak", "wait", "crash", "dedupe", "broken", "healthy", "lag"}

func open(t testing.TB, o sqs.Options) *sqs.Log {
	t.Helper()
	o.AWS = awsconf.Options{Endpoint: sqstest.Endpoint(t), Region: "us-east-1"}
	if o.Prefix == "" {
		o.Prefix = sqstest.Prefix()
	}
	o.PublishBatch = 9 // sqs.Options.PublishBatch
	if o.WaitTime == 0 {
		o.WaitTime = time.Second
	}
	l, err := sqs.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("SNS/SQS at %s: %v", sqstest.Endpoint(t), err)
	}
	t.Cleanup(func() {
		if err := l.Destroy(context.Background()); err != nil {
			t.Errorf("deleting the topic and queues of %s: %v", o.Prefix, err)
		}
	})
	return l
}

func TestConformance(t *testing.T) {
	groups := map[string][]string{}
	for _, g := range conformanceGroups {
		groups[g] = nil
	}
	eventstest.Run(t, func(t testing.TB, _ rookery.Clock) events.Log {
		return open(t, sqs.Options{Groups: groups})
	})
}

var ctx = context.Background()

func next(t *testing.T, s events.Subscription) events.Delivery {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, eventstest.NextWait)
	defer cancel()
	d, err := s.Next(c)
	if err != nil {
		t.Fatalf("Next: %v; %s", err, s)
	}
	return d
}

// A group's filter policy keeps the types it does not name out of its queue.
func TestFilterPolicy(t *testing.T) {
	l := open(t, sqs.Options{Groups: map[string][]string{"posts": {"PostCreated"}, "all": nil}})
	evs := []rookery.Event{
		{ID: "f1", Type: "PostCreated", Version: 1, Key: "p1", Payload: []byte(`{}`)},
		{ID: "f2", Type: "LikeCreated", Version: 1, Key: "p1", Payload: []byte(`{}`)},
		{ID: "f3", Type: "PostCreated", Version: 1, Key: "p2", Payload: []byte(`{}`)},
	}
	if err := l.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]int{"posts": 2, "all": 3} {
		s, err := l.Subscribe(ctx, group, events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range want {
			d := next(t, s)
			if group == "posts" && d.Event().Type != "PostCreated" {
				t.Fatalf("group posts got a %s", d.Event().Type)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, _, err := l.Lag(ctx, group); err != nil || n != 0 {
			t.Fatalf("lag of %s = %d, %v", group, n, err)
		}
		s.Close()
	}
}

// A message whose consumers die holding it (MaxReceives times) moves to the dead-letter queue
// through the redrive policy, is listed there as a dead letter, and a replay delivers it again.
func TestRedrive(t *testing.T) {
	l := open(t, sqs.Options{Groups: map[string][]string{"crashy": nil}, MaxReceives: 2})
	ev := rookery.Event{ID: "poison", Type: "PostCreated", Version: 1, Key: "p", Payload: []byte(`{"n":1}`)}
	if err := l.Append(ctx, []rookery.Event{ev}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		s, err := l.Subscribe(ctx, "crashy", events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := next(t, s); d.Event().ID != "poison" || d.Attempt() != attempt {
			t.Fatalf("delivery %s attempt %d; want poison attempt %d", d.Event().ID, d.Attempt(), attempt)
		}
		s.Close() // dies holding it
	}
	var list []events.DeadLetter
	deadline := time.Now().Add(15 * time.Second)
	for len(list) == 0 && time.Now().Before(deadline) {
		// SQS moves the message on the receive after its last: a subscription's poll triggers it.
		s, _ := l.Subscribe(ctx, "crashy", events.SubscribeOptions{})
		c, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		if d, err := s.Next(c); err == nil {
			t.Fatalf("delivered a %dth time: %s", d.Attempt(), d.Event().ID)
		}
		cancel()
		s.Close()
		var err error
		if list, err = l.DeadLetters(ctx, "crashy", "", 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(list) != 1 || list[0].Event.ID != "poison" || string(list[0].Event.Payload) != `{"n":1}` || list[0].Error == "" {
		t.Fatalf("dead letters = %+v", list)
	}
	if err := l.Replay(ctx, "crashy", "poison"); err != nil {
		t.Fatal(err)
	}
	s, _ := l.Subscribe(ctx, "crashy", events.SubscribeOptions{})
	defer s.Close()
	d := next(t, s)
	if d.Event().ID != "poison" {
		t.Fatalf("replayed %s", d.Event().ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := l.DeadLetters(ctx, "crashy", "", 10); len(left) != 0 {
		t.Fatalf("left after the replay: %+v", left)
	}
}

// Two processes share a group: every event is handled once, in order per key across them.
func TestTwoProcesses(t *testing.T) {
	prefix := sqstest.Prefix()
	groups := map[string][]string{"shared": nil}
	a := open(t, sqs.Options{Prefix: prefix, Groups: groups})
	b, err := sqs.Open(ctx, sqs.Options{Prefix: prefix, Groups: groups, WaitTime: time.Second, PublishBatch: 9,
		AWS: awsconf.Options{Endpoint: sqstest.Endpoint(t), Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var evs []rookery.Event
	for i := range 200 {
		evs = append(evs, rookery.Event{ID: fmt.Sprintf("e%03d", i), Type: "T", Version: 1, Key: fmt.Sprintf("k%d", i%7), Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	if err := a.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]int{}
	seen := map[string]int{}
	byLog := map[int]int{}
	var wg sync.WaitGroup
	for i, l := range []*sqs.Log{a, b, a, b} {
		s, err := l.Subscribe(ctx, "shared", events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(seen) == len(evs)
				mu.Unlock()
				if done {
					return
				}
				c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				d, err := s.Next(c)
				cancel()
				if err != nil {
					continue
				}
				var p struct{ N int }
				json.Unmarshal(d.Event().Payload, &p)
				mu.Lock()
				if n, ok := last[d.Event().Key]; ok && p.N < n {
					t.Errorf("key %s: %d after %d", d.Event().Key, p.N, n)
				}
				last[d.Event().Key] = p.N
				seen[d.Event().ID]++
				byLog[i%2]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := d.Ack(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s handled %d times", id, n)
		}
	}
	if byLog[0] == 0 || byLog[1] == 0 {
		t.Fatalf("work by process: %v", byLog)
	}
}

// Ping (readyz) answers while the topic and the queues exist, and fails when one is gone.
func TestPing(t *testing.T) {
	prefix := sqstest.Prefix()
	l := open(t, sqs.Options{Prefix: prefix, Groups: map[string][]string{"ready": nil}})
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	other, err := sqs.Open(ctx, sqs.Options{Prefix: prefix, AWS: awsconf.Options{Endpoint: sqstest.Endpoint(t), Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Destroy(ctx); err != nil { // the topic; l's queues stay
		t.Fatal(err)
	}
	if err := l.Ping(ctx); err == nil {
		t.Fatal("Ping answered without the topic")
	}
}

// Reading a group that does not exist (its lag, its dead letters) creates no queue.
func TestUnknownGroupCreatesNothing(t *testing.T) {
	l := open(t, sqs.Options{})
	if n, _, err := l.Lag(ctx, "typo"); err != nil || n != 0 {
		t.Fatalf("Lag = %d, %v", n, err)
	}
	if list, err := l.DeadLetters(ctx, "typo", "", 10); err != nil || len(list) != 0 {
		t.Fatalf("DeadLetters = %v, %v", list, err)
	}
	if _, err := l.DeadLetterByID(ctx, "typo", "x"); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("DeadLetterByID = %v", err)
	}
	if err := l.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.Requests()["SQS.CreateQueue"]; got != 0 {
		t.Fatalf("%d queues created", got)
	}
}

// A group whose types changed (a new version handles one more) gets them on its next Open: the
// queue's subscription is changed in place. SNS refuses a second subscription of the queue with
// other attributes, so without that the upgraded workers could not start, or would not get them.
func TestFilterPolicyChanges(t *testing.T) {
	prefix := sqstest.Prefix()
	old, err := sqs.Open(ctx, sqs.Options{Prefix: prefix, Groups: map[string][]string{"notes": {"PostCreated"}},
		AWS: awsconf.Options{Endpoint: sqstest.Endpoint(t), Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	l := open(t, sqs.Options{Prefix: prefix, Groups: map[string][]string{"notes": {"PostCreated", "FollowDeleted"}}}) // destroys both
	evs := []rookery.Event{
		{ID: "g1", Type: "FollowDeleted", Version: 1, Key: "f1", Payload: []byte(`{}`)},
		{ID: "g2", Type: "LikeCreated", Version: 1, Key: "f1", Payload: []byte(`{}`)},
		{ID: "g3", Type: "PostCreated", Version: 1, Key: "f1", Payload: []byte(`{}`)},
	}
	if err := l.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(ctx, "notes", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for range 2 {
		d := next(t, s)
		got = append(got, d.Event().Type)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[FollowDeleted PostCreated]" {
		t.Fatalf("the group got %v; want [FollowDeleted PostCreated]", got)
	}
	if n, _, err := l.Lag(ctx, "notes"); err != nil || n != 0 {
		t.Fatalf("lag = %d, %v; want 0 (LikeCreated kept out)", n, err)
	}
}
