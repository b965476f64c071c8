package events_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/internal/crashtest"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
)

func openTable(t testing.TB, dir string) table.Table {
	t.Helper()
	opts := pebble.Options{InMemory: dir == "", Dir: dir, Clock: rookery.SystemClock, CursorKey: []byte("k")}
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// direct makes tab append ob's events to l (on tab's engine) in the transactions that write them,
// as `rookery serve` runs it.
func direct(tab table.Table, l *embedded.Log, ob *events.Outbox) {
	tab.(*pebble.DB).SetStager(l)
	ob.Direct = true
}

// openPipeline returns a table, an embedded log and an outbox between them in one of the layouts:
// the log in an engine of its own ("separate"), in the table's ("shared"), or in the table's with
// the table appending the outbox's events ("direct").
func openPipeline(t testing.TB, dir, layout string, ob *events.Outbox) (table.Table, *embedded.Log) {
	t.Helper()
	tableDir, opts := "", embedded.Options{InMemory: true, Partitions: 4}
	if dir != "" {
		tableDir, opts = filepath.Join(dir, "table"), embedded.Options{Dir: filepath.Join(dir, "log"), Partitions: 4}
	}
	tab := openTable(t, tableDir)
	if layout != "separate" {
		opts = embedded.Options{Engine: tab.(*pebble.DB).Engine(), Partitions: 4}
	}
	l, err := embedded.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ob.Table, ob.Log = tab, l
	if layout == "direct" {
		direct(tab, l, ob)
	}
	return tab, l
}

var pipelineLayouts = []string{"separate", "shared", "direct"}

func TestOutboxEventsCommitWithTheirChange(t *testing.T) {
	for _, layout := range pipelineLayouts {
		t.Run(layout, func(t *testing.T) { testOutboxEventsCommitWithTheirChange(t, layout) })
	}
}

func testOutboxEventsCommitWithTheirChange(t *testing.T, layout string) {
	ctx := context.Background()
	ob := &events.Outbox{Shards: 4}
	tab, l := openPipeline(t, "", layout, ob)
	eventstest.RunPipeline(t, ob, l, nil)

	write := func(id string, conds ...table.Cond) error {
		w, err := ob.Write(eventstest.Event(id, "post-1", 0))
		if err != nil {
			t.Fatal(err)
		}
		err = tab.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "POST#1", table.SK: "LIKE#" + id}, conds...), w})
		ob.Notify()
		return err
	}
	if err := write("like-a", table.NotExists(table.PK)); err != nil {
		t.Fatal(err)
	}
	// The same like again fails its condition: no change, so no event.
	if err := write("like-a-again"); err != nil {
		t.Fatal(err)
	}
	if err := write("like-a-again", table.NotExists(table.PK)); !rookery.IsKind(err, rookery.Conflict) {
		t.Fatalf("repeat = %v", err)
	}
	s, err := l.Subscribe(ctx, "g", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for range 2 {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := s.Next(c)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Event().ID)
		d.Ack(ctx)
	}
	if got[0] != "like-a" || got[1] != "like-a-again" {
		t.Fatalf("events %v", got)
	}
	eventually(t, "outbox empty", func() bool { n, _ := ob.Pending(ctx, 10); return n == 0 })
	if _, err := ob.Write(rookery.Event{ID: "x"}); !rookery.IsKind(err, rookery.Invalid) {
		t.Fatalf("Write of an event without type and key = %v", err)
	}
}

// TestNotifyWakesForEveryUncommittedWrite: two transactions write events of one shard; the first
// commits and notifies, and the relay moves its event while the second has not committed. The
// second's Notify must still wake the relay (with an hour's poll, nothing else would): its event
// reaches the log at once. It failed when Notify woke only the shards written since the last
// Notify, whose flag the first Notify had taken.
func TestNotifyWakesForEveryUncommittedWrite(t *testing.T) {
	ctx := context.Background()
	tab, l := openTable(t, ""), newLog(t)
	ob := &events.Outbox{Table: tab, Log: l, Shards: 1, Poll: time.Hour}
	eventstest.RunPipeline(t, ob, l, nil)
	s, err := l.Subscribe(ctx, "g", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(id string) table.Write {
		w, err := ob.Write(eventstest.Event(id, "post-1", 0))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	commit := func(w table.Write) {
		if err := tab.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
		ob.Notify()
	}
	next := func() string {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		d, err := s.Next(c)
		if err != nil {
			t.Fatalf("no event within 5 s: %v", err)
		}
		d.Ack(ctx)
		return d.Event().ID
	}
	first, second := write("e1"), write("e2")
	commit(first)
	if id := next(); id != "e1" {
		t.Fatalf("first event %s", id)
	}
	commit(second)
	if id := next(); id != "e2" {
		t.Fatalf("second event %s", id)
	}
}

// The crash test. A child process runs writers (each change and its event in one transaction,
// printing "ack ID" once committed), the relay, and a consumer that records every event it sees
// (idempotently). It is SIGKILLed at random moments, several times, then run once more to drain.
// Every acknowledged change's event must have reached the consumer.
const crashEnv = "ROOKERY_OUTBOX_CRASH_DIR"

func TestOutboxCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	ob := &events.Outbox{Shards: 4, Poll: 10 * time.Millisecond}
	tab, l := openPipeline(t, dir, os.Getenv("ROOKERY_OUTBOX_CRASH_LAYOUT"), ob)
	go ob.Run(ctx)
	go (&events.Runner{Log: l}).Run(ctx, events.Consumer{Group: "seen", Handle: func(ctx context.Context, ev rookery.Event) error {
		return tab.Put(ctx, table.Item{table.PK: "SEEN", table.SK: ev.ID})
	}})
	round := os.Getenv("ROOKERY_OUTBOX_CRASH_ROUND")
	if round == "drain" {
		for {
			n, err1 := ob.Pending(ctx, 1)
			lag, _, err2 := l.Lag(ctx, "seen")
			if err1 == nil && err2 == nil && n == 0 && lag == 0 {
				fmt.Println("drained")
				os.Exit(0)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	acks := make(chan string, 1024)
	var seq atomic.Int64
	for w := range 4 {
		go func() {
			for {
				id := fmt.Sprintf("r%s-%012d", round, seq.Add(1))
				ew, _ := ob.Write(eventstest.Event(id, fmt.Sprintf("key-%d", w), 0))
				err := tab.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "DATA", table.SK: id}), ew})
				if err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				ob.Notify()
				acks <- id
			}
		}()
	}
	crashtest.Acks(acks)
}

// It runs in every layout of openPipeline.
func TestOutboxSurvivesSIGKILL(t *testing.T) {
	for _, layout := range pipelineLayouts {
		t.Run(layout, func(t *testing.T) { testOutboxSurvivesSIGKILL(t, layout) })
	}
}

func testOutboxSurvivesSIGKILL(t *testing.T, layout string) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	child := func(round string, kill time.Duration) string {
		env := []string{crashEnv + "=" + dir, "ROOKERY_OUTBOX_CRASH_ROUND=" + round, "ROOKERY_OUTBOX_CRASH_LAYOUT=" + layout}
		last, _ := crashtest.Run(t, "TestOutboxCrashChild", env, kill, func(id string) { acked[id] = true })
		return last
	}
	for r := range rounds {
		last := child(strconv.Itoa(r), time.Duration(150+rand.IntN(500))*time.Millisecond)
		if strings.HasPrefix(last, "error") {
			t.Fatalf("round %d: %s", r, last)
		}
	}
	if last := child("drain", 0); last != "drained" {
		t.Fatalf("the drain run ended with %q", last)
	}
	tab := openTable(t, filepath.Join(dir, "table"))
	ctx := context.Background()
	seen := map[string]bool{}
	q := table.Query{PK: "SEEN", Limit: 1000}
	for {
		p, err := tab.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			seen[it.String(table.SK)] = true
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	missing := 0
	for id := range acked {
		if !seen[id] {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged change %s: its event never reached the consumer", id)
			}
		}
	}
	if missing > 0 || len(acked) == 0 {
		t.Fatalf("%d of %d acknowledged events missing", missing, len(acked))
	}
	t.Logf("%d rounds killed at random, %d acknowledged changes, all %d events consumed (%d seen, including unacknowledged commits)", rounds, len(acked), len(acked), len(seen))
}

// TestFlushBeforeDirect: events left in the outbox by a run without Direct (an earlier version)
// reach the log ahead of the events Direct writes put there, when Flush runs first, as `rookery
// serve` does.
func TestFlushBeforeDirect(t *testing.T) {
	ctx := context.Background()
	ob := &events.Outbox{Shards: 4}
	tab, l := openPipeline(t, "", "shared", ob) // no relay runs: the outbox keeps what is written
	write := func(id string) {
		w, err := ob.Write(eventstest.Event(id, "post-1", 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	write("e1")
	write("e2")
	if n, _ := ob.Pending(ctx, 10); n != 2 {
		t.Fatalf("%d events in the outbox; want 2", n)
	}
	if err := ob.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	direct(tab, l, ob)
	write("e3")
	if n, _ := ob.Pending(ctx, 10); n != 0 {
		t.Fatalf("%d events left in the outbox", n)
	}
	s, err := l.Subscribe(ctx, "g", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, want := range []string{"e1", "e2", "e3"} {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := s.Next(c)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if d.Event().ID != want {
			t.Fatalf("got %s; want %s", d.Event().ID, want)
		}
		d.Ack(ctx)
	}
}

// Sweep relays only what an earlier sweep saw: an item a relay moves meanwhile is not appended by
// the sweep too, an item nobody moved is, one round later.
func TestSweepRelaysWhatStays(t *testing.T) {
	ctx := context.Background()
	ob := &events.Outbox{Shards: 4}
	tab, l := openPipeline(t, "", "shared", ob) // no relay runs
	for _, id := range []string{"s1", "s2"} {
		w, err := ob.Write(eventstest.Event(id, "k-"+id, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.TransactWrite(ctx, []table.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	seen, n, err := ob.Sweep(ctx, nil)
	if err != nil || n != 0 || len(seen) != 2 {
		t.Fatalf("first sweep: seen %v, relayed %d, %v", seen, n, err)
	}
	delete(seen, "s2") // as if a relay had moved s2 between the rounds and a new item had come
	seen, n, err = ob.Sweep(ctx, seen)
	if err != nil || n != 1 || len(seen) != 1 {
		t.Fatalf("second sweep: seen %v, relayed %d, %v", seen, n, err)
	}
	if _, n, _ := ob.Sweep(ctx, seen); n != 1 {
		t.Fatalf("third sweep relayed %d; want s2", n)
	}
	if p, _ := ob.Pending(ctx, 10); p != 0 {
		t.Fatalf("%d left in the outbox", p)
	}
	if n, _, _ := l.Lag(ctx, "g"); n != 2 {
		t.Fatalf("the log holds %d events; want 2", n)
	}
}
