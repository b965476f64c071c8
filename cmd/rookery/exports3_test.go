package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	exports3 "github.com/rookery/rookery/export/s3"
	"github.com/rookery/rookery/internal/awsconf"
)

// startS3Emulator builds and starts gofakes3 (go.mod names it as a tool) on a free port, in memory,
// with bucket, and returns its URL.
func startS3Emulator(t *testing.T, bucket string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gofakes3")
	build := exec.Command("go", "build", "-o", bin, "github.com/johannesboyne/gofakes3/cmd/gofakes3")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building gofakes3: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-backend", "memory", "-host", addr, "-initialbucket", bucket, "-quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("gofakes3 does not answer on %s", addr)
		}
	}
}

// TestExportToS3EndToEnd runs the server with --export-dir s3://... against an S3 emulator in a
// process of its own: the events of the requests made land in the bucket as Hive-partitioned
// Parquet files, once each, which DuckDB reads back (scripts/duckdb-query.sh); the local data
// directory holds the journal only.
func TestExportToS3EndToEnd(t *testing.T) {
	endpoint := startS3Emulator(t, "lake")
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--export-dir", "s3://lake/rookery/events", "--s3-endpoint", endpoint, "--export-roll-rows", "5")
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	ann := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/ann", server, `{"username":"ann_x"}`); st != 201 {
		t.Fatalf("PUT ann = %d %v", st, body)
	}
	const posts = 12
	for i := range posts {
		if st, body := call(t, "POST", srv.url+"/v1/posts", ann, fmt.Sprintf(`{"text":"post %d"}`, i)); st != 201 {
			t.Fatalf("post = %d %v", st, body)
		}
	}
	time.Sleep(500 * time.Millisecond) // the export consumer handles the events
	srv.stop()                         // rolls what is pending

	ctx := context.Background()
	client, err := exports3.NewClient(ctx, awsconf.Options{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	st := exports3.New(client, "lake", "rookery/events")
	names, err := st.List(ctx)
	if err != nil || len(names) == 0 {
		t.Fatalf("the bucket holds %v, %v", names, err)
	}
	local := t.TempDir()
	for _, name := range names {
		if !strings.HasPrefix(name, "dt=") || !strings.HasSuffix(name, ".parquet") {
			t.Fatalf("an object that is not an export file: %s", name)
		}
		path := filepath.Join(local, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(path), 0o755)
		f, _ := os.Create(path)
		if err := st.Get(ctx, name, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	out, err := exec.Command("../../scripts/duckdb-query.sh", "SELECT type, count(*) AS n, count(DISTINCT event_id) AS ids "+
		"FROM read_parquet('"+local+"/*/*.parquet', hive_partitioning = true) WHERE type IN ('PostCreated', 'UserCreated') GROUP BY type ORDER BY type").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("duckdb: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), `[{"type":"PostCreated","n":"12","ids":"12"},{"type":"UserCreated","n":"1","ids":"1"}]`; got != want {
		t.Fatalf("DuckDB reads %s; want %s", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "export-journal")); len(entries) != 1 || entries[0].Name() != "_journal" {
		t.Fatalf("the export's local directory holds %v; want the journal only", entries)
	}
}
