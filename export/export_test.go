package export_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/export"
	"github.com/rookery/rookery/internal/crashtest"
)

// event returns event i, dated on one of three days.
func event(i int) rookery.Event {
	at := time.Date(2026, 11, 20+i%3, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return rookery.Event{ID: fmt.Sprintf("ev%06d", i), Type: "PostCreated", Version: 1, Key: fmt.Sprintf("k%d", i%50),
		OccurredAt: rookery.Time{Time: at}, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
}

// checkExactlyOnce reads every file under dir and checks that it holds events 0..n-1 once each,
// each in the partition of its date.
func checkExactlyOnce(t *testing.T, dir string, n int) {
	t.Helper()
	rows, err := export.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.EventID]++
	}
	for i := range n {
		ev := event(i)
		if count[ev.ID] != 1 {
			t.Fatalf("event %s is in the export %d times", ev.ID, count[ev.ID])
		}
	}
	if len(rows) != n {
		t.Fatalf("%d rows for %d events", len(rows), n)
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "_journal") {
			return err
		}
		if !strings.HasPrefix(d.Name(), "part-") || !strings.HasSuffix(d.Name(), ".parquet") {
			t.Errorf("a file that is not a finished part is visible: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	e, err := export.Open(export.Options{Dir: dir, MaxRows: 300})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 1000
	for i := range n {
		for range 2 { // delivered twice
			if err := e.Handle(ctx, event(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, dir, n)
	rows, _ := export.ReadDir(filepath.Join(dir, "dt=2026-11-21"))
	for _, r := range rows {
		ev := event(int(r.OccurredAt % 1000)) // the millisecond offset is i mod 1000
		if r.Type != "PostCreated" || r.Version != 1 || !strings.HasPrefix(r.Payload, `{"n":`) ||
			time.UnixMilli(r.OccurredAt).UTC().Format(time.DateOnly) != "2026-11-21" || r.EventID != ev.ID {
			t.Fatalf("row %+v", r)
		}
	}
	// Reopening finds everything rolled and adds nothing.
	e, err = export.Open(export.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Handle(ctx, event(5)); err != nil { // delivered again after the restart
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, dir, n)
}

const crashEvents = 20_000

// TestCrashExactlyOnce runs the exporter in a child process over an embedded log of 20,000 events,
// kills it with SIGKILL at random moments five times, lets a last run finish, and finds every event
// in the files exactly once, and no torn file.
func TestCrashExactlyOnce(t *testing.T) {
	if dir := os.Getenv("ROOKERY_EXPORT_CHILD"); dir != "" {
		exportChild(t, dir)
		return
	}
	dir := t.TempDir()
	log, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	var evs []rookery.Event
	for i := range crashEvents {
		evs = append(evs, event(i))
	}
	if err := log.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	log.Close()
	env := []string{"ROOKERY_EXPORT_CHILD=" + dir}
	for run := range 5 {
		kill := time.Duration(100+rand.IntN(400)) * time.Millisecond
		_, killed := crashtest.Run(t, "TestCrashExactlyOnce", env, kill, func(string) {})
		rows, err := export.ReadDir(filepath.Join(dir, "export"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: killed after %v: %v; %d rows exported so far", run, kill, killed, len(rows))
	}
	done := false
	_, killed := crashtest.Run(t, "TestCrashExactlyOnce", env, 0, func(v string) { done = v == "done" })
	if killed || !done {
		t.Fatalf("the last run did not finish (killed %v)", killed)
	}
	checkExactlyOnce(t, filepath.Join(dir, "export"), crashEvents)
}

// exportChild consumes the log with the exporter until the group has no lag, then closes it.
func exportChild(t *testing.T, dir string) {
	log, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	e, err := export.Open(export.Options{Dir: filepath.Join(dir, "export"), MaxRows: 700, MaxAge: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &events.Runner{Log: log}
	go r.Run(ctx, events.Consumer{Group: "export", Handle: e.Handle, Concurrency: 8})
	for {
		time.Sleep(20 * time.Millisecond)
		n, _, err := log.Lag(ctx, "export")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	cancel()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ack done")
}

// TestDuckDBReadsTheExport reads the files with DuckDB (scripts/duckdb-query.sh installs it from
// npm on first use): the Hive partitions, the column types of the documented schema, and every
// event once.
func TestDuckDBReadsTheExport(t *testing.T) {
	dir := t.TempDir()
	e, err := export.Open(export.Options{Dir: dir, MaxRows: 400})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := e.Handle(context.Background(), event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	query := func(sql string) string {
		t.Helper()
		out, err := exec.Command("../scripts/duckdb-query.sh", sql).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("duckdb: %v\n%s", err, ee.Stderr)
			}
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	files := "'" + dir + "/*/*.parquet'"
	got := query("SELECT CAST(dt AS VARCHAR) AS dt, count(*) AS n, count(DISTINCT event_id) AS ids, " +
		"epoch_ms(min(occurred_at)) AS first, sum(CAST(json_extract(payload, '$.n') AS BIGINT)) AS total " +
		"FROM read_parquet(" + files + ", hive_partitioning = true) GROUP BY dt ORDER BY dt")
	first := func(day int) string { return fmt.Sprint(event(day).OccurredAt.UnixMilli()) }
	want := `[{"dt":"2026-11-20","n":"334","ids":"334","first":"` + first(0) + `","total":"166833"},` +
		`{"dt":"2026-11-21","n":"333","ids":"333","first":"` + first(1) + `","total":"166167"},` +
		`{"dt":"2026-11-22","n":"333","ids":"333","first":"` + first(2) + `","total":"166500"}]`
	if got != want {
		t.Errorf("per date:\n got %s\nwant %s", got, want)
	}
	got = query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(" + files + ", hive_partitioning = true))")
	want = `[{"column_name":"event_id","column_type":"VARCHAR"},{"column_name":"type","column_type":"VARCHAR"},` +
		`{"column_name":"version","column_type":"INTEGER"},{"column_name":"key","column_type":"VARCHAR"},` +
		`{"column_name":"occurred_at","column_type":"TIMESTAMP WITH TIME ZONE"},{"column_name":"payload","column_type":"JSON"},` +
		`{"column_name":"exported_at","column_type":"TIMESTAMP WITH TIME ZONE"},{"column_name":"dt","column_type":"DATE"}]`
	if got != want {
		t.Errorf("schema:\n got %s\nwant %s", got, want)
	}
}

// TestRollRetriesAfterAFailedWrite: a generation whose file cannot be written (here the date's
// directory is taken by a file) is written by a later roll, before the newer generation.
func TestRollRetriesAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	e, err := export.Open(export.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	blocker := filepath.Join(dir, "dt=2026-11-20")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.Handle(ctx, event(0)); err != nil {
		t.Fatal(err)
	}
	if err := e.Roll(); err == nil {
		t.Fatal("a roll into a directory taken by a file succeeded")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := e.Handle(ctx, event(3)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := export.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.EventID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{event(0).ID, event(3).ID}) {
		t.Fatalf("exported %v", ids)
	}
}
