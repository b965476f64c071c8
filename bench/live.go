package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rookery/rookery/graph"
	"github.com/rookery/rookery/internal/progress"
	"github.com/rookery/rookery/internal/sse"
)

// Live delivery under load: streams held open by the harness, and a webhook receiver it runs.

// OpStream is the time from a post's 201 (as the workload got it) to its feed.post event at a
// follower's stream; OpWebhook, from a webhook message's timestamp (its event) to its arrival at
// the receiver.
const (
	OpStream  = "stream_lag"
	OpWebhook = "webhook_lag"
)

// Streams holds users' streams (GET /v1/stream) open against a Rookery server, acting for each
// with a server token and X-On-Behalf-Of, and measures every feed.post event's lag from its
// post's 201.
type Streams struct {
	base, token string
	client      *http.Client
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	open   atomic.Int64
	events atomic.Int64
	ended  atomic.Int64 // streams the server ended (or that failed to open)

	mu     sync.Mutex
	posted map[string]time.Time   // post id -> its 201
	early  map[string][]time.Time // feed.post events that came before their post's 201
	hist   *hdrhistogram.Histogram
}

// StreamingUsers picks n users, at random (seeded), among those who follow someone: the ones
// whose streams a post can reach.
func StreamingUsers(g graph.Graph, n int, seed uint64) []int {
	follows := make([]bool, g.Nodes)
	for _, e := range g.Edges {
		follows[e[0]] = true
	}
	var cands []int
	for u, ok := range follows {
		if ok {
			cands = append(cands, u)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	return cands[:min(n, len(cands))]
}

// OpenStreams opens the streams of users (the ids of prefix) and returns once each is open.
func OpenStreams(ctx context.Context, base, token, prefix string, users []int, out io.Writer) (*Streams, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 0, 0
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: -1}).DialContext
	ctx, cancel := context.WithCancel(ctx)
	s := &Streams{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Transport: tr}, cancel: cancel,
		posted: map[string]time.Time{}, early: map[string][]time.Time{},
		hist: hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)}
	bar := progress.New(out, "streams", int64(len(users)), "streams")
	ready := make(chan error, len(users))
	sem := make(chan struct{}, 64) // opening, not holding: 64 handshakes at a time
	for _, u := range users {
		s.wg.Add(1)
		go s.hold(ctx, UserID(prefix, u), ready, sem)
	}
	var failed int
	var first error
	for i := range users {
		if err := <-ready; err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
		bar.Set(int64(i + 1))
	}
	bar.Finish()
	if failed > 0 {
		s.Close()
		return nil, fmt.Errorf("bench: %d of %d streams did not open; the first: %v", failed, len(users), first)
	}
	return s, nil
}

// hold opens one stream, reports on ready, and reads it until ctx ends.
func (s *Streams) hold(ctx context.Context, user string, ready chan<- error, sem chan struct{}) {
	defer s.wg.Done()
	sem <- struct{}{}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("X-On-Behalf-Of", user)
	resp, err := s.client.Do(req)
	<-sem
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("GET /v1/stream for %s: %s", user, resp.Status)
	}
	ready <- err
	if err != nil {
		s.ended.Add(1)
		return
	}
	defer resp.Body.Close()
	s.open.Add(1)
	defer s.open.Add(-1)
	sse.Read(resp.Body, func(e sse.Event) bool {
		if e.Type == "feed.post" {
			s.arrived(postIDOf(e.Data), time.Now())
		}
		return true
	})
	if ctx.Err() == nil {
		s.ended.Add(1)
	}
}

// postIDOf reads the post id of a feed.post event's data without decoding the rest.
func postIDOf(data string) string {
	const key = `"post":{"id":"`
	_, rest, ok := strings.Cut(data, key)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

func (s *Streams) arrived(post string, at time.Time) {
	s.events.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.posted[post]; ok {
		s.hist.RecordValue(max(at.Sub(t).Microseconds(), 1))
		return
	}
	s.early[post] = append(s.early[post], at)
}

// Posted records a post's 201 (Config.OnPost).
func (s *Streams) Posted(post string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.posted[post] = at
	for _, e := range s.early[post] {
		s.hist.RecordValue(max(e.Sub(at).Microseconds(), 1)) // the event came first: no lag
	}
	delete(s.early, post)
}

// Reset forgets the lags recorded so far (a warm-up's).
func (s *Streams) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hist.Reset()
	s.early = map[string][]time.Time{}
}

// Events returns how many feed.post events arrived.
func (s *Streams) Events() int64 { return s.events.Load() }

// Open returns how many streams are open.
func (s *Streams) Open() int64 { return s.open.Load() }

// Result returns the lag figures of the feed.post events so far, in the harness's operation form
// (Errors counts the streams that ended or did not open).
func (s *Streams) Result() *OpResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := opResult(s.hist)
	if n := s.ended.Load(); n > 0 {
		o.Errors = map[string]int{"ended": int(n)}
	}
	return o
}

// Close ends every stream.
func (s *Streams) Close() {
	s.cancel()
	s.wg.Wait()
}

// Receiver is a webhook receiver: it answers every delivery with 204 after Delay and measures the
// lag of each message from its timestamp (Standard Webhooks body: {"type","timestamp","data"}).
type Receiver struct {
	Delay time.Duration
	srv   *http.Server
	ln    net.Listener
	count atomic.Int64
	mu    sync.Mutex
	seen  map[string]bool
	hist  *hdrhistogram.Histogram
}

// StartReceiver listens on addr (port 0: a free one).
func StartReceiver(addr string, delay time.Duration) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{Delay: delay, ln: ln, seen: map[string]bool{}, hist: hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now()
	var m struct{ Timestamp time.Time }
	json.Unmarshal(body, &m)
	r.mu.Lock()
	if id := req.Header.Get("webhook-id"); !r.seen[id] {
		r.seen[id] = true
		r.count.Add(1)
		if !m.Timestamp.IsZero() {
			r.hist.RecordValue(max(now.Sub(m.Timestamp).Microseconds(), 1))
		}
	}
	r.mu.Unlock()
	time.Sleep(r.Delay)
	w.WriteHeader(http.StatusNoContent)
}

// URL is where the receiver takes deliveries.
func (r *Receiver) URL() string { return "http://" + r.ln.Addr().String() + "/hook" }

// Reset forgets the lags recorded so far (a warm-up's).
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.Reset()
}

// Count returns the messages received (once each).
func (r *Receiver) Count() int64 { return r.count.Load() }

// Result returns the lag figures of the messages so far.
func (r *Receiver) Result() *OpResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return opResult(r.hist)
}

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func opResult(h *hdrhistogram.Histogram) *OpResult {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return &OpResult{Count: h.TotalCount(), P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000}
}
