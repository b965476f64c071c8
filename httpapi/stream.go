package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/live"
)

// StreamOptions configure GET /v1/stream.
type StreamOptions struct {
	// Hub holds the streams open on this process; nil turns streams off (404).
	Hub *live.Hub
	// Heartbeat is how often an idle stream gets a comment line, which keeps proxies from closing
	// it, and checks its log for an event the bus lost; 0 means 15 s.
	Heartbeat time.Duration
	// Buffer is how many events a stream may fall behind before it is dropped; 0 means 256.
	Buffer int
	// WriteTimeout is how long one write to a client may take before the stream is dropped as
	// stalled; 0 means 10 s.
	WriteTimeout time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	return o
}

// presenceRefresh is how often an open stream keeps its user present (app.StreamWindow).
const presenceRefresh = time.Hour

// streamTicket issues a single-use stream ticket (POST /v1/stream/tickets).
func (s *server) streamTicket(w http.ResponseWriter, r *http.Request) {
	t, err := s.App.NewStreamTicket(r.Context())
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusCreated, t)
}

// streamAuth authenticates a stream request: a bearer token as on every route, or a stream ticket
// (?ticket=), which a browser's EventSource can send.
func (s *server) streamAuth(h http.HandlerFunc) http.Handler {
	authed := s.authed(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ticket := r.URL.Query().Get("ticket")
		if ticket == "" || r.Header.Get("Authorization") != "" {
			authed.ServeHTTP(w, r)
			return
		}
		c, err := s.App.RedeemStreamTicket(r.Context(), ticket)
		if err != nil {
			s.problem(w, r, err)
			return
		}
		h(w, r.WithContext(rookery.WithCaller(r.Context(), c)))
	})
}

// stream serves GET /v1/stream: the caller's stream as Server-Sent Events, from after
// Last-Event-ID if the client sends one (a reconnecting EventSource does), else from now.
func (s *server) stream(w http.ResponseWriter, r *http.Request) {
	const op rookery.Op = "httpapi.stream"
	o := s.Streams.withDefaults()
	ctx := r.Context()
	c, _ := rookery.CallerFrom(ctx)
	if s.Streams.Hub == nil {
		s.problem(w, r, rookery.E(op, rookery.NotFound, "live streams are turned off on this server"))
		return
	}
	user := c.Acting()
	// Subscribe before reading the log: whatever is appended after the read arrives on sub.
	sub := s.Streams.Hub.Subscribe(user, o.Buffer)
	defer sub.Close()
	lastID := r.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = r.URL.Query().Get("last_event_id")
	}
	start, err := s.App.OpenStream(ctx, strings.TrimSpace(lastID))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events through as they come
	w.WriteHeader(http.StatusOK)
	st := &sse{s: s, w: w, rc: http.NewResponseController(w), timeout: o.WriteTimeout, user: user, last: start.Head}
	// The server's read timeout would end the stream: a stream reads nothing after its request,
	// and a client that goes away is noticed by the writes.
	_ = st.rc.SetReadDeadline(time.Time{})
	s.Metrics.StreamsOpen.Inc()
	defer s.Metrics.StreamsOpen.Dec()
	outcome := "new"
	switch {
	case start.Reset:
		outcome = "reset"
	case lastID != "":
		outcome = "resumed"
	}
	s.Metrics.StreamResumes.WithLabelValues(outcome).Inc()
	if err := st.begin(ctx, start); err != nil {
		st.end(err)
		return
	}

	heartbeat := time.NewTicker(o.Heartbeat)
	defer heartbeat.Stop()
	presence := time.NewTicker(presenceRefresh)
	defer presence.Stop()
	var expired <-chan time.Time
	if !c.Expires.IsZero() {
		t := time.NewTimer(time.Until(c.Expires))
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-expired:
			return // the token has expired: the client needs a new one to go on
		case <-sub.Dropped:
			s.Metrics.StreamDrops.WithLabelValues("behind").Inc()
			return
		case m := <-sub.C:
			err = st.deliver(ctx, m)
		case <-heartbeat.C:
			err = st.heartbeat(ctx)
		case <-presence.C:
			_, err = s.App.OpenStream(ctx, "")
		}
		if err != nil {
			st.end(err)
			return
		}
	}
}

// sse writes one stream: every event after last, in order, each once.
type sse struct {
	s       *server
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	user    string
	last    uint64 // the id of the last event sent
}

// begin sends what the stream starts with: a reset, or the events the client missed.
func (st *sse) begin(ctx context.Context, start app.StreamStart) error {
	if err := st.write("retry: 2000\n\n"); err != nil {
		return err
	}
	if start.Reset {
		return st.reset(ctx)
	}
	for _, ev := range start.Events {
		if err := st.send(ev); err != nil {
			return err
		}
	}
	st.last = start.Head
	// An id without data sets the client's last event id without an event (the SSE processing
	// model): a client that goes away before its first event resumes from here, not from now.
	if err := st.write("id: " + strconv.FormatUint(st.last, 10) + "\n\n"); err != nil {
		return err
	}
	return st.flush()
}

// deliver sends m if it is the next event; a later one means the bus lost some: they are read
// from the log first.
func (st *sse) deliver(ctx context.Context, m *live.Message) error {
	switch {
	case m.Seq <= st.last:
		return nil // sent already (read from the log)
	case m.Seq > st.last+1:
		return st.catchUp(ctx, m.Seq)
	}
	if err := st.send(app.StreamEvent{Seq: m.Seq, Type: m.Type, Data: m.Data}); err != nil {
		return err
	}
	return st.flush()
}

// heartbeat writes a comment line and reads what the bus may have lost.
func (st *sse) heartbeat(ctx context.Context) error {
	if err := st.write(":\n\n"); err != nil {
		return err
	}
	head, err := st.s.App.StreamHead(ctx, st.user)
	if err != nil {
		return err
	}
	if head > st.last {
		return st.catchUp(ctx, head)
	}
	return st.flush()
}

// catchUp sends the events after last up to upTo from the log.
func (st *sse) catchUp(ctx context.Context, upTo uint64) error {
	evs, ok, err := st.s.App.StreamSince(ctx, st.user, st.last, upTo)
	if err != nil {
		return err
	}
	if !ok {
		return st.reset(ctx)
	}
	for _, ev := range evs {
		if err := st.send(ev); err != nil {
			return err
		}
	}
	return st.flush()
}

// reset tells the client to refetch, and goes on from the log's head.
func (st *sse) reset(ctx context.Context) error {
	head, err := st.s.App.StreamHead(ctx, st.user)
	if err != nil {
		return err
	}
	st.last = head
	st.s.Metrics.StreamEvents.WithLabelValues(app.StreamReset).Inc()
	if err := st.write(fmt.Sprintf("id: %d\nevent: %s\ndata: {\"reason\":\"the events after your last id are no longer kept: refetch\"}\n\n", head, app.StreamReset)); err != nil {
		return err
	}
	return st.flush()
}

// send writes ev.
func (st *sse) send(ev app.StreamEvent) error {
	st.last = ev.Seq
	st.s.Metrics.StreamEvents.WithLabelValues(ev.Type).Inc()
	return st.write("id: " + strconv.FormatUint(ev.Seq, 10) + "\nevent: " + ev.Type + "\ndata: " + string(ev.Data) + "\n\n")
}

// clientGone is a write to the client that failed or timed out.
type clientGone struct{ error }

func (st *sse) write(s string) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	if _, err := st.w.Write([]byte(s)); err != nil {
		return clientGone{err}
	}
	return nil
}

func (st *sse) flush() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	if err := st.rc.Flush(); err != nil {
		return clientGone{err}
	}
	return nil
}

// end closes a stream that failed: a client that stopped reading is counted as stalled; a failed
// read of the log is logged. Either way the client reconnects and resumes from its last id.
func (st *sse) end(err error) {
	if errors.As(err, new(clientGone)) {
		st.s.Metrics.StreamDrops.WithLabelValues("stalled").Inc()
		return
	}
	st.s.Log.Warn("a stream ended on an error", "err", err)
}
