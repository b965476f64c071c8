package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/parquet-go/parquet-go"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/export"
	"github.com/rookery/rookery/export/s3"
	"github.com/rookery/rookery/internal/awsconf"
)

// fakeS3 starts an S3 emulator (gofakes3, in process, over HTTP) with bucket, and returns a client.
func fakeS3(t *testing.T, bucket string) *awss3.Client {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	c, err := s3.NewClient(context.Background(), awsconf.Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return c
}

func event(i int) rookery.Event {
	at := time.Date(2026, 11, 20+i%3, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return rookery.Event{ID: fmt.Sprintf("ev%06d", i), Type: "PostCreated", Version: 1, Key: fmt.Sprintf("k%d", i%50),
		OccurredAt: rookery.Time{Time: at}, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
}

// checkExactlyOnce reads every object of st and checks that events 0..n-1 are there once each, in
// the partition of their date.
func checkExactlyOnce(t *testing.T, st *s3.Store, n int) {
	t.Helper()
	ctx := context.Background()
	names, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, name := range names {
		dt, file, ok := strings.Cut(name, "/")
		if !ok || !strings.HasPrefix(dt, "dt=") || !strings.HasPrefix(file, "part-") || !strings.HasSuffix(file, ".parquet") {
			t.Fatalf("an object that is not an export file: %s", name)
		}
		var b bytes.Buffer
		if err := st.Get(ctx, name, &b); err != nil {
			t.Fatal(err)
		}
		rows, err := parquet.Read[export.Row](bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range rows {
			count[r.EventID]++
			if got := "dt=" + time.UnixMilli(r.OccurredAt).UTC().Format(time.DateOnly); got != dt {
				t.Fatalf("%s in %s", r.EventID, dt)
			}
		}
	}
	for i := range n {
		if id := event(i).ID; count[id] != 1 {
			t.Fatalf("event %s is in the export %d times", id, count[id])
		}
	}
	if len(count) != n {
		t.Fatalf("%d events in the export; want %d", len(count), n)
	}
}

// TestExportToS3 exports events delivered twice to a bucket, with single puts and with multipart
// uploads; then a crash between the puts of a generation and the journal's mark is replayed: the
// restart rolls the generation again and writes no row twice.
func TestExportToS3(t *testing.T) {
	for _, part := range []int64{0, 5 << 10} {
		t.Run(fmt.Sprintf("part size %d", part), func(t *testing.T) {
			c := fakeS3(t, "lake")
			st := s3.New(c, "lake", "rookery/events")
			st.PartSize = part
			dir := t.TempDir()
			e, err := export.Open(export.Options{Dir: dir, Store: st, MaxRows: 300})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const n = 1000
			for i := range n {
				for range 2 {
					if err := e.Handle(ctx, event(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, st, n)
			if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "_journal" {
				t.Fatalf("the local directory holds more than the journal: %v", entries)
			}

			// A crash after the files were put but before the generation was marked rolled: the
			// restart rolls it again.
			done, _ := filepath.Glob(filepath.Join(dir, "_journal", "*.done"))
			if len(done) == 0 {
				t.Fatal("no rolled journal")
			}
			last := done[len(done)-1]
			if err := os.Rename(last, strings.TrimSuffix(last, ".done")+".jsonl"); err != nil {
				t.Fatal(err)
			}
			e, err = export.Open(export.Options{Dir: dir, Store: st, MaxRows: 300})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, st, n)
		})
	}
}

// TestPutIsConditional: a name stored already keeps its object (If-None-Match: *), and the local
// file is removed either way.
func TestPutIsConditional(t *testing.T) {
	ctx := context.Background()
	st := s3.New(fakeS3(t, "bkt"), "bkt", "")
	put := func(content string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "f")
		os.WriteFile(path, []byte(content), 0o644)
		if err := st.Put(ctx, "dt=2026-11-25/part-0000000001.parquet", path); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("the local file is still there: %v", err)
		}
	}
	put("first")
	put("second")
	var b bytes.Buffer
	if err := st.Get(ctx, "dt=2026-11-25/part-0000000001.parquet", &b); err != nil || b.String() != "first" {
		t.Fatalf("the object holds %q, %v; want the first put's", b.String(), err)
	}
	if has, err := st.Has(ctx, "dt=2026-11-25/part-0000000002.parquet"); err != nil || has {
		t.Fatalf("Has of a missing name = %v, %v", has, err)
	}
	for in, want := range map[string][2]string{"s3://lake/a/b/": {"lake", "a/b"}, "s3://lake": {"lake", ""}} {
		if b, p, ok := s3.ParseURL(in); !ok || b != want[0] || p != want[1] {
			t.Errorf("ParseURL(%q) = %q, %q, %v", in, b, p, ok)
		}
	}
	if _, _, ok := s3.ParseURL("/var/export"); ok {
		t.Error("ParseURL accepted a path")
	}
}
