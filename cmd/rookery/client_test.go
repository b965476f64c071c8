package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitDrained: bench --import waits until /metrics reports no consumer lag, and gives up with
// a clear error after its timeout.
func TestWaitDrained(t *testing.T) {
	var polls atomic.Int64
	var stuck atomic.Bool
	behind := func() int64 {
		if stuck.Load() {
			return 5
		}
		return max(0, 2-polls.Add(1)) // 1 on the first poll, then 0
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE rookery_consumer_lag_events gauge\nrookery_consumer_lag_events{group=\"fanout\"} %d\nrookery_consumer_lag_events{group=\"counters\"} 0\nrookery_other 7\n", behind())
	}))
	defer srv.Close()
	c := &apiClient{base: srv.URL, http: srv.Client()}
	var out bytes.Buffer
	if err := c.waitDrained(context.Background(), time.Minute, &out); err != nil {
		t.Fatal(err)
	}
	if polls.Load() != 2 || !strings.Contains(out.String(), "1 events behind") || !strings.Contains(out.String(), "caught up") {
		t.Fatalf("%d polls; printed %q", polls.Load(), out.String())
	}
	stuck.Store(true)
	if err := c.waitDrained(context.Background(), 0, &out); err == nil || !strings.Contains(err.Error(), "still 5 events behind") {
		t.Fatalf("waiting on a server that never catches up: %v", err)
	}
}

// TestDoLong: the calls that may take minutes (backup, streak repair) outlast the client's
// timeout, printing a line while they wait; an ordinary call on the same client gives up.
// (TestBackupToASlowS3 runs `rookery backup` so against the real server; a repair cannot be made
// slow there, and runs through the same call.)
func TestDoLong(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		fmt.Fprint(w, `{"checked":3}`)
	}))
	defer srv.Close()
	hc := srv.Client()
	hc.Timeout = 500 * time.Millisecond
	c := &apiClient{base: srv.URL, http: hc}
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 400 * time.Millisecond
	var out bytes.Buffer
	body, err := c.doLong(context.Background(), "POST", "/v1/admin/streaks/repair", nil, "repairing", &out)
	if err != nil || string(body) != `{"checked":3}` {
		t.Fatalf("a long call: %q, %v", body, err)
	}
	if !strings.Contains(out.String(), "repairing: ") {
		t.Fatalf("no progress while waiting: %q", out.String())
	}
	if _, err := c.do(context.Background(), "GET", "/v1/users/ann", nil); err == nil {
		t.Fatal("an ordinary call outlasted the client's timeout")
	}
}
