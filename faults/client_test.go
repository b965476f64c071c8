package faults_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/auth"
)

var secret = []byte("fault-test-secret-fault-test-secret")

func token(t testing.TB, sub string, server bool) string {
	t.Helper()
	tok, err := auth.Mint(secret, sub, server, 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// faultClock says whether a fault is under way, or ended so recently that the deployment may still
// answer 503 for it (a pool reconnecting, a lease moving).
type faultClock struct{ until atomic.Int64 } // Unix ns; max int64 while a fault runs

const faultGrace = 10 * time.Second

func (f *faultClock) begin() { f.until.Store(1<<63 - 1) }
func (f *faultClock) end()   { f.until.Store(time.Now().Add(faultGrace).UnixNano()) }
func (f *faultClock) active() bool {
	return time.Now().UnixNano() < f.until.Load()
}

// client talks to the API nodes as a real client would: a request that fails (the node is gone,
// it timed out, 503, or 409 because the first request with its Idempotency-Key still runs) is sent
// again to the next node with the same Idempotency-Key, with a growing pause, for up to a minute.
// After 3 s of such 409s (the node that claimed the key was killed: the claim lasts 60 s) the key
// is dropped: the client's own post and comment ids still make the write happen once.
type client struct {
	t      testing.TB
	nodes  []*node
	http   *http.Client
	faults *faultClock

	mu    sync.Mutex
	next  int
	stats map[string]int // "503", "conn", "replayed", "retried" ...
}

type reply struct {
	status  int
	body    map[string]any
	raw     string
	retried bool // an earlier attempt failed: it may have been applied
}

func newClient(t testing.TB, nodes []*node, faults *faultClock) *client {
	return &client{t: t, nodes: nodes, faults: faults, stats: map[string]int{},
		http: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

func (c *client) count(what string) {
	c.mu.Lock()
	c.stats[what]++
	c.mu.Unlock()
}

func (c *client) node() *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	return c.nodes[c.next%len(c.nodes)]
}

// do sends the request until it gets an answer that is not a transient failure.
func (c *client) do(method, path, tok, body, idemKey string) reply {
	c.t.Helper()
	start := time.Now()
	wait := 50 * time.Millisecond
	var conflictSince time.Time
	retried := false
	for attempt := 0; ; attempt++ {
		n := c.node()
		req, _ := http.NewRequest(method, n.url+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		resp, err := c.http.Do(req)
		var r reply
		transient := ""
		if err != nil {
			transient = "conn"
		} else {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			r = reply{status: resp.StatusCode, raw: string(b), retried: retried}
			json.Unmarshal(b, &r.body)
			switch {
			case rerr != nil:
				transient = "conn"
			case resp.StatusCode == 503:
				transient = "503"
				if !c.faults.active() {
					c.t.Errorf("%s %s on %s: 503 with no fault under way: %s", method, path, n.name, b)
				}
			case resp.StatusCode >= 500:
				c.t.Errorf("%s %s on %s: %d %s", method, path, n.name, resp.StatusCode, b)
				return r
			case resp.StatusCode == 409 && strings.Contains(string(b), "being processed"):
				transient = "409"
				if conflictSince.IsZero() {
					conflictSince = time.Now()
				} else if time.Since(conflictSince) > 3*time.Second {
					idemKey = ""
				}
			case resp.Header.Get("Idempotent-Replayed") == "true":
				c.count("replayed")
			}
		}
		if transient == "" {
			return r
		}
		c.count(transient)
		if transient == "conn" && !c.faults.active() {
			c.t.Errorf("%s %s on %s: %v with no fault under way", method, path, n.name, err)
		}
		retried = true
		c.count("retried")
		if time.Since(start) > time.Minute {
			c.t.Fatalf("%s %s: still failing after a minute (last: %s %v %s)", method, path, transient, err, r.raw)
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// must is do, failing the test unless the status is one of want.
func (c *client) must(method, path, tok, body, idemKey string, want ...int) reply {
	c.t.Helper()
	r := c.do(method, path, tok, body, idemKey)
	for _, w := range want {
		if r.status == w {
			return r
		}
	}
	c.t.Fatalf("%s %s = %d %s; want %v", method, path, r.status, r.raw, want)
	return r
}

// pages reads every page of a list, with page size limit, and returns the items.
func (c *client) pages(path, tok string, limit int) ([]map[string]any, error) {
	var all []map[string]any
	cursor := ""
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for range 1000 {
		r := c.do("GET", fmt.Sprintf("%s%slimit=%d&cursor=%s", path, sep, limit, cursor), tok, "", "")
		if r.status != 200 {
			return nil, fmt.Errorf("GET %s = %d %s", path, r.status, r.raw)
		}
		items, _ := r.body["items"].([]any)
		for _, it := range items {
			all = append(all, it.(map[string]any))
		}
		next, ok := r.body["next_cursor"].(string)
		if !ok {
			return all, nil
		}
		if len(items) == 0 {
			return nil, fmt.Errorf("GET %s: an empty page with a next cursor", path)
		}
		cursor = next
	}
	return nil, fmt.Errorf("GET %s: paging does not end", path)
}

func jsonBody(v any) string {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}

// recordingT is a seed's test that remembers what its checks reported, to say it again at the end
// of a failed seed's output, after the deployment's logs (CI shows a failed test's last lines).
type recordingT struct {
	*testing.T
	mu      sync.Mutex
	reports []string
}

func (r *recordingT) record(s string) {
	const most = 2000
	if len(s) > most {
		s = s[:most] + "..."
	}
	r.mu.Lock()
	r.reports = append(r.reports, s)
	r.mu.Unlock()
}

// said returns what the checks reported, in order.
func (r *recordingT) said() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		return "(no check reported; see above)"
	}
	return strings.Join(r.reports, "\n  then: ")
}

func (r *recordingT) Error(args ...any) {
	r.Helper()
	r.Errorf("%s", strings.TrimSuffix(fmt.Sprintln(args...), "\n")) // as testing.T.Error formats
}

func (r *recordingT) Errorf(format string, args ...any) {
	r.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

func (r *recordingT) Fatal(args ...any) {
	r.Helper()
	r.Fatalf("%s", strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}

func (r *recordingT) Fatalf(format string, args ...any) {
	r.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}
