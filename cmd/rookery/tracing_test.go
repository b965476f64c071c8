package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf, as the Go exporter sends by default): it
// keeps every span it is sent.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not OTLP/HTTP protobuf traces", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	rc.url = "http://" + l.Addr().String()
	return rc
}

// trace returns the spans of trace id (hex) received so far.
func (rc *otlpReceiver) trace(id string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingEndToEnd: a request that carries a W3C traceparent is a span of that trace on the
// server, and the consumers that handle the event it caused (fan-out, counters, notifications ...)
// handle it in spans that are its children, all sent over OTLP/HTTP to a collector; with no
// endpoint configured nothing is sent and nothing breaks.
func TestTracingEndToEnd(t *testing.T) {
	rc := startOTLPReceiver(t)
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--otlp-endpoint", rc.url, "--trace-sample", "0")
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	ann := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	for _, u := range []string{"ann", "bob"} {
		if st, body := call(t, "PUT", srv.url+"/v1/users/"+u, server, `{"username":"`+u+`_t"}`); st != 201 {
			t.Fatalf("PUT %s = %d %v", u, st, body)
		}
	}
	traceID := "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("POST", srv.url+"/v1/posts", strings.NewReader(`{"text":"traced"}`))
	req.Header.Set("Authorization", "Bearer "+ann)
	req.Header.Set("Content-Type", "application/json")
	// Sampled by the caller: recorded although --trace-sample is 0.
	req.Header.Set("traceparent", fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /v1/posts = %v, %v", resp, err)
	}
	resp.Body.Close()
	// A request with no trace context starts none (sampling 0).
	if st, _ := call(t, "GET", srv.url+"/v1/feed", ann, ""); st != 200 {
		t.Fatalf("feed = %d", st)
	}
	time.Sleep(time.Second) // the consumers handle the post's event
	srv.stop()              // flushes the spans

	spans := rc.trace(traceID)
	t.Logf("the trace's spans: %v", names(spans))
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	root := byName["POST /v1/posts"]
	if root == nil || hex.EncodeToString(root.ParentSpanId) != "00f067aa0ba902b7" || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no server span POST /v1/posts under the caller's span; spans of the trace: %v", names(spans))
	}
	for _, name := range []string{"fanout PostCreated", "counters PostCreated", "activities PostCreated"} {
		s := byName[name]
		if s == nil {
			t.Errorf("no span %q in the trace; it has %v", name, names(spans))
			continue
		}
		if string(s.ParentSpanId) != string(root.SpanId) || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
			t.Errorf("span %q is not a consumer span under the request's", name)
		}
	}
	// The events the consumers made carry the trace on: the activity the post counted as.
	if a, f := byName["activities PostCreated"], byName["erasure ActivityRecorded"]; a == nil || f == nil || string(f.ParentSpanId) != string(a.SpanId) {
		t.Errorf("the ActivityRecorded event's consumers are not under the span of the consumer that made it: %v", names(spans))
	}
	if len(rc.spans) != len(spans) {
		t.Errorf("%d spans outside the caller's trace were recorded with sampling 0: %v", len(rc.spans)-len(spans), names(rc.spans))
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTracingScaleOut: in scale-out the trace crosses processes through NATS: the API process's
// request span is the parent of the worker process's consumer spans.
func TestTracingScaleOut(t *testing.T) {
	rc := startOTLPReceiver(t)
	vars := scaleOutVars(t, "rookery-trace")
	vars["ROOKERY_OTLP_ENDPOINT"], vars["ROOKERY_TRACE_SAMPLE"] = rc.url, "1"
	api := start(t, vars, "--data-dir", t.TempDir(), "--role", "api")
	worker := start(t, vars, "--data-dir", t.TempDir(), "--role", "worker")
	ann := strings.TrimSpace(command(t, vars, "token", "--sub", "ann"))
	if st, body := call(t, "PUT", api.url+"/v1/users/ann", ann, `{"username":"ann_s"}`); st != 201 {
		t.Fatalf("PUT ann = %d %v", st, body)
	}
	st, post := call(t, "POST", api.url+"/v1/posts", ann, `{"text":"traced across processes"}`)
	if st != 201 {
		t.Fatalf("post = %d %v", st, post)
	}
	// Wait until the worker has handled the post (ann's own feed holds it), then flush both.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := call(t, "GET", api.url+"/v1/feed", ann, "")
		if its, _ := body["items"].([]any); len(its) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the post never reached ann's feed")
		}
	}
	time.Sleep(500 * time.Millisecond)
	worker.stop()
	api.stop()
	rc.mu.Lock()
	var req *tracepb.Span
	for _, s := range rc.spans {
		if s.Name == "POST /v1/posts" {
			req = s
		}
	}
	rc.mu.Unlock()
	if req == nil {
		t.Fatal("no span of POST /v1/posts")
	}
	spans := rc.trace(hex.EncodeToString(req.TraceId))
	var fanout *tracepb.Span
	for _, s := range spans {
		if s.Name == "fanout PostCreated" {
			fanout = s
		}
	}
	if fanout == nil || string(fanout.ParentSpanId) != string(req.SpanId) {
		t.Fatalf("the worker's fan-out span is not under the API's request span; the trace: %v", names(spans))
	}
}
