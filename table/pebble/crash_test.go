package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/crashtest"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/table/tabletest"
)

// The crash test runs a child process (this test binary, in writer mode) that commits transactions
// in a loop from several goroutines and prints "ack N" after each commit returns, then kills it with
// SIGKILL at a random moment. After reopening, every acknowledged transaction must be there whole,
// and no transaction may be there in part.

const (
	crashDirEnv   = "ROOKERY_CRASH_WRITER_DIR"
	crashStartEnv = "ROOKERY_CRASH_WRITER_START" // each round numbers its transactions from here
)

func crashOptions(dir string) pebble.Options {
	return pebble.Options{Dir: dir, Schema: tabletest.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1}
}

// TestCrashWriter is the child: it does nothing unless started by TestCrashRecovery.
func TestCrashWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	db, err := pebble.Open(crashOptions(dir))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	start, _ := strconv.Atoi(os.Getenv(crashStartEnv))
	out := make(chan string, 1024)
	for w := range 8 {
		go func() {
			for n := start + w; ; n += 8 {
				// Each transaction writes three items that must appear together: two in the base table
				// (one of them indexed) and a counter bump.
				err := db.TransactWrite(context.Background(), []table.Write{
					table.PutWrite(table.Item{table.PK: "tx", table.SK: fmt.Sprintf("%08d#a", n), "n": int64(n)}),
					table.PutWrite(table.Item{table.PK: "tx", table.SK: fmt.Sprintf("%08d#b", n), "GSI1PK": "ix", "GSI1SK": fmt.Sprintf("%08d", n)}),
					table.UpdateWrite(table.Key{PK: "count", SK: strconv.Itoa(w)}, table.Update{Add: map[string]int64{"n": 1}}),
				})
				if err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				out <- strconv.Itoa(n)
			}
		}()
	}
	crashtest.Acks(out)
}

func TestCrashRecovery(t *testing.T) {
	runs := 5
	if testing.Short() {
		runs = 2
	}
	for run := range runs {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			dir := t.TempDir()
			// Several crashes in a row on the same directory: recovery itself must be crash-safe.
			acked := map[int]bool{}
			for crash := range 3 {
				crashOnce(t, dir, crash*10_000_000, time.Duration(50+rand.IntN(400))*time.Millisecond, acked)
				verify(t, dir, acked, crash)
			}
		})
	}
}

func crashOnce(t *testing.T, dir string, start int, after time.Duration, acked map[int]bool) {
	t.Helper()
	env := []string{crashDirEnv + "=" + dir, crashStartEnv + "=" + strconv.Itoa(start)}
	last, killed := crashtest.Run(t, "TestCrashWriter", env, after, func(v string) {
		n, _ := strconv.Atoi(v)
		acked[n] = true
	})
	if last != "" {
		t.Fatalf("writer: %s", last)
	}
	if !killed {
		t.Fatal("writer ended without being killed")
	}
}

func verify(t *testing.T, dir string, acked map[int]bool, crash int) {
	t.Helper()
	ctx := context.Background()
	db, err := pebble.Open(crashOptions(dir))
	if err != nil {
		t.Fatalf("reopen after crash %d: %v", crash, err)
	}
	defer db.Close()
	present := map[int]string{}
	q := table.Query{PK: "tx", Limit: 1000}
	for {
		p, err := db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			num, part, _ := strings.Cut(it.String(table.SK), "#")
			n, _ := strconv.Atoi(num)
			present[n] += part
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	indexed := 0
	q = table.Query{Index: "GSI1", PK: "ix", Limit: 1000}
	for {
		p, err := db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		indexed += len(p.Items)
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	var counted int64
	for w := range 8 {
		it, err := db.Get(ctx, table.Key{PK: "count", SK: strconv.Itoa(w)})
		if err == nil {
			counted += it.Int("n")
		}
	}
	for n := range acked {
		if present[n] != "ab" {
			t.Fatalf("crash %d: acknowledged transaction %d is %q after reopen; want both items", crash, n, present[n])
		}
	}
	for n, parts := range present {
		if parts != "ab" {
			t.Fatalf("crash %d: transaction %d is half there: %q", crash, n, parts)
		}
	}
	if indexed != len(present) || counted != int64(len(present)) {
		t.Fatalf("crash %d: %d transactions, %d index entries, counters sum to %d", crash, len(present), indexed, counted)
	}
	t.Logf("crash %d: %d acknowledged, %d durable", crash, len(acked), len(present))
}
