package dynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/table/tabletest"
)

// faultProxy stands between the SDK and DynamoDB Local and injects the faults DynamoDB Local never
// produces: BatchGetItem answers that leave keys unprocessed, and throttling.
type faultProxy struct {
	unprocessed atomic.Int64 // this many BatchGetItem calls answer "all keys unprocessed"
	throttle    atomic.Bool  // every call answers ThrottlingException
	batchCalls  atomic.Int64
	calls       atomic.Int64
}

func (p *faultProxy) start(t *testing.T) string {
	target, _ := url.Parse(dynamotest.Endpoint(t))
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		if p.throttle.Load() {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`)
			return
		}
		if op == "BatchGetItem" {
			p.batchCalls.Add(1)
			if p.unprocessed.Add(-1) >= 0 {
				body, _ := io.ReadAll(r.Body)
				var req struct {
					RequestItems json.RawMessage
				}
				json.Unmarshal(body, &req)
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				fmt.Fprintf(w, `{"Responses":{},"UnprocessedKeys":%s}`, req.RequestItems)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func faultDB(t *testing.T, endpoint string, attempts int) *dynamo.DB {
	t.Helper()
	direct := dynamotest.Client(t)
	name := dynamotest.NewTable(t, direct, tabletest.Schema)
	client, err := dynamo.NewClient(context.Background(), dynamo.ClientOptions{
		Endpoint: endpoint, Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", MaxAttempts: attempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := dynamo.New(client, dynamo.Options{Table: name, Schema: tabletest.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	ctx := context.Background()
	p := &faultProxy{}
	db := faultDB(t, p.start(t), 0)
	var keys []table.Key
	for i := range 30 {
		k := table.Key{PK: fmt.Sprintf("p%d", i), SK: "s"}
		keys = append(keys, k)
		if err := db.Put(ctx, table.Item{table.PK: k.PK, table.SK: k.SK, "i": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	p.unprocessed.Store(4)
	items, err := db.BatchGet(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if it == nil || it.Int("i") != int64(i) {
			t.Fatalf("item %d = %v after retries", i, it)
		}
	}
	if n := p.batchCalls.Load(); n != 5 {
		t.Fatalf("BatchGetItem was called %d times; want 4 unprocessed answers and 1 success", n)
	}
	// A context that ends while keys remain unprocessed stops the retries with Unavailable.
	p.unprocessed.Store(1 << 30)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := db.BatchGet(cctx, keys); !rookery.IsKind(err, rookery.Unavailable) {
		t.Fatalf("BatchGet with endless unprocessed keys = %v; want Unavailable", err)
	}
}

func TestThrottlingIsUnavailableAfterRetries(t *testing.T) {
	ctx := context.Background()
	p := &faultProxy{}
	db := faultDB(t, p.start(t), 3)
	p.throttle.Store(true)
	before := p.calls.Load()
	err := db.Put(ctx, table.Item{table.PK: "a", table.SK: "b"})
	if !rookery.IsKind(err, rookery.Unavailable) {
		t.Fatalf("throttled Put = %v; want Unavailable", err)
	}
	if n := p.calls.Load() - before; n != 3 {
		t.Fatalf("the SDK tried %d times; want 3 (MaxAttempts)", n)
	}
	if strings.Contains(rookery.Message(err), "Rate of requests") {
		t.Fatalf("engine text in the client message: %q", rookery.Message(err))
	}
	p.throttle.Store(false)
	if err := db.Put(ctx, table.Item{table.PK: "a", table.SK: "b"}); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL
	srv.Close() // nothing listens there now
	client, err := dynamo.NewClient(context.Background(), dynamo.ClientOptions{Endpoint: endpoint, Region: "us-east-1", AccessKeyID: "x", SecretAccessKey: "x", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	db, _ := dynamo.New(client, dynamo.Options{Table: "t", Clock: rookery.SystemClock, CursorKey: []byte("k")})
	if _, err := db.Get(context.Background(), table.Key{PK: "a", SK: "b"}); !rookery.IsKind(err, rookery.Unavailable) {
		t.Fatalf("Get with DynamoDB down = %v; want Unavailable", err)
	}
	if err := db.Ping(context.Background()); !rookery.IsKind(err, rookery.Unavailable) {
		t.Fatalf("Ping with DynamoDB down = %v", err)
	}
}
