package pebble_test

import (
	"context"
	"errors"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
)

// keepStager takes the puts to partition "KEEP" and stores each under its own key ("x" + SK).
type keepStager struct {
	staged    [][]table.Write
	committed []error
	fail      error
}

func (s *keepStager) Takes(w table.Write) bool { return w.Item[table.PK] == "KEEP" }

func (s *keepStager) Stage(b *cpebble.Batch, ws []table.Write) (func(error), error) {
	if s.fail != nil {
		return nil, s.fail
	}
	s.staged = append(s.staged, ws)
	for _, w := range ws {
		b.Set([]byte("x"+w.Item.String(table.SK)), nil, nil)
	}
	return func(err error) { s.committed = append(s.committed, err) }, nil
}

// The stager sees the writes it takes, in the transaction's batch, only once every condition
// holds; the store keeps no item of them; a failed condition's index is the caller's.
func TestStager(t *testing.T) {
	ctx := context.Background()
	db := open(t, pebble.Options{InMemory: true, Clock: rookery.SystemClock, CursorKey: []byte("k")})
	s := &keepStager{}
	db.SetStager(s)
	keep := table.PutWrite(table.Item{table.PK: "KEEP", table.SK: "e1"})
	own := table.PutWrite(table.Item{table.PK: "OWN", table.SK: "1"}, table.NotExists(table.PK))
	if err := db.TransactWrite(ctx, []table.Write{keep, own}); err != nil {
		t.Fatal(err)
	}
	if len(s.staged) != 1 || len(s.staged[0]) != 1 || s.staged[0][0].Item.String(table.SK) != "e1" || len(s.committed) != 1 || s.committed[0] != nil {
		t.Fatalf("staged %v, committed %v", s.staged, s.committed)
	}
	if _, err := db.Get(ctx, table.Key{PK: "KEEP", SK: "e1"}); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("the store kept the staged item: %v", err)
	}
	if _, closer, err := db.Engine().Get([]byte("xe1")); err != nil {
		t.Fatalf("the stager's key is not in the batch: %v", err)
	} else {
		closer.Close()
	}
	if _, err := db.Get(ctx, table.Key{PK: "OWN", SK: "1"}); err != nil {
		t.Fatal(err)
	}
	// The condition of the second write fails: nothing is staged, and the index is the caller's.
	err := db.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "KEEP", table.SK: "e2"}), own})
	var cerr *table.ConditionError
	if !rookery.IsKind(err, rookery.Conflict) || !errors.As(err, &cerr) || cerr.Index != 1 {
		t.Fatalf("failed condition = %v", err)
	}
	if len(s.staged) != 1 || len(s.committed) != 1 {
		t.Fatalf("a failed transaction was staged: %v %v", s.staged, s.committed)
	}
	// A put with a condition is the store's own, whatever its partition.
	if err := db.Put(ctx, table.Item{table.PK: "KEEP", table.SK: "mine"}, table.NotExists(table.PK)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(ctx, table.Key{PK: "KEEP", SK: "mine"}); err != nil {
		t.Fatalf("a conditional put was taken: %v", err)
	}
	// A stager's error fails the transaction, and nothing of it is stored.
	s.fail = rookery.E(rookery.Op("test"), rookery.Internal, "broken")
	if err := db.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "OWN", table.SK: "2"}), keep}); !rookery.IsKind(err, rookery.Internal) {
		t.Fatalf("stager failure = %v", err)
	}
	if _, err := db.Get(ctx, table.Key{PK: "OWN", SK: "2"}); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("a failed transaction stored its own write: %v", err)
	}
}

// Writes under table.WithoutSync may be lost by a crash, but not when they stage events: those are
// published on commit, so they are synced, and so is everything committed before them.
func TestWithoutSync(t *testing.T) {
	ctx := table.WithoutSync(context.Background())
	fs := vfs.NewCrashableMem()
	opts := pebble.Options{Dir: "/db", FS: fs, Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1}
	db := open(t, opts)
	db.SetStager(&keepStager{})
	put := func(ws ...table.Write) {
		t.Helper()
		if err := db.TransactWrite(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	put(table.PutWrite(table.Item{table.PK: "OWN", table.SK: "before"}))
	put(table.PutWrite(table.Item{table.PK: "OWN", table.SK: "staging"}), table.PutWrite(table.Item{table.PK: "KEEP", table.SK: "e1"}))
	put(table.PutWrite(table.Item{table.PK: "OWN", table.SK: "after"}))

	crashed := open(t, pebble.Options{Dir: "/db", FS: fs.CrashClone(vfs.CrashCloneCfg{}), Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1})
	for sk, want := range map[string]bool{"before": true, "staging": true, "after": false} {
		_, err := crashed.Get(context.Background(), table.Key{PK: "OWN", SK: sk})
		if got := err == nil; got != want {
			t.Errorf("after the crash, %q is there: %v, want %v (err %v)", sk, got, want, err)
		}
	}
}
