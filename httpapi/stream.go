package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
	// Buffer is how many events a stream may fall behind before it is dropped; 0 means 128.
	Buffer int
	// WriteTimeout is how long one write to a client may take before the stream is dropped as
	// stalled; 0 means 10 s.
	WriteTimeout time.Duration
	// Stop, when closed, ends every stream (the server is shutting down: its clients resume
	// elsewhere or after the restart); nil: never.
	Stop <-chan struct{}
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Buffer <= 0 {
		o.Buffer = 128
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
//
// An open stream costs what an idle connection must: over HTTP/1.1 the connection is taken over
// from the server once the stream begins (its buffers and its reader goroutine go), and the
// heartbeats come from one pulse for all streams instead of a timer each.
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
	defer func() {
		if sub != nil { // not handed over to the stream's goroutine
			sub.Close()
		}
	}()
	lastID := r.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = r.URL.Query().Get("last_event_id")
	}
	start, err := s.App.OpenStream(ctx, strings.TrimSpace(lastID))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := openSSE(w, r, o.WriteTimeout)
	if err != nil {
		s.Log.Warn("a stream could not begin", "err", err)
		return
	}
	st := &sse{s: s, out: out, user: user, last: start.Head}
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
		out.close()
		return
	}
	s.Metrics.StreamsOpen.Inc()
	follow := func(ctx context.Context, sub *live.Subscription) {
		defer s.Metrics.StreamsOpen.Dec()
		defer out.close()
		defer sub.Close()
		st.follow(ctx, sub, c, o)
	}
	held := sub
	sub = nil // follow closes it
	if _, own := out.(*connOut); own {
		// The stream goes on in a goroutine of its own and the request ends, so that the server
		// lets go of the connection's buffers and request; the stream owns the connection now.
		go follow(context.WithoutCancel(ctx), held)
		return
	}
	follow(ctx, held)
}

// follow writes the stream's events as they come, and its heartbeats, until it ends.
func (st *sse) follow(ctx context.Context, sub *live.Subscription, c rookery.Caller, o StreamOptions) {
	s := st.s
	p := s.pulse(o)
	slot := int(s.streamSeq.Add(1))
	refreshEvery := max(int(presenceRefresh/o.Heartbeat), 1)
	var err error
	for beats := 1; ; beats++ {
		select {
		case <-ctx.Done():
			return
		case <-o.Stop:
			return
		case <-sub.Dropped:
			s.Metrics.StreamDrops.WithLabelValues("behind").Inc()
			return
		case m := <-sub.C:
			err = st.deliver(ctx, m)
			// The events waiting behind it go out in the same write: a client that fell behind
			// catches up in fewer writes, not one each.
		waiting:
			for n := 1; err == nil && n < sseBatch; n++ {
				select {
				case m := <-sub.C:
					err = st.deliver(ctx, m)
				default:
					break waiting
				}
			}
			if err == nil {
				err = st.flush()
			}
		case <-p.next(slot):
			if !c.Expires.IsZero() && !time.Now().Before(c.Expires) {
				return // the token has expired: the client needs a new one to go on
			}
			err = st.heartbeat(ctx)
			if err == nil && beats%refreshEvery == 0 {
				_, err = s.App.OpenStream(rookery.WithCaller(ctx, c), "") // the user stays present while the stream is open
			}
		}
		if err != nil {
			st.end(err)
			return
		}
	}
}

// sseBatch bounds the events written at once.
const sseBatch = 64

// pulse returns the server's heartbeat pulse, started with the first stream.
func (s *server) pulse(o StreamOptions) *pulse {
	s.pulseOnce.Do(func() { s.beats = newPulse(o.Heartbeat, o.Stop) })
	return s.beats
}

// pulseSlots is how many groups the streams' heartbeats are spread over.
const pulseSlots = 16

// pulse wakes the open streams for their heartbeats: slot i's channel is closed, and replaced,
// once a period, the slots a sixteenth of a period apart, so that the streams' heartbeats (and
// their reads of the log) do not all come at once.
type pulse struct {
	mu    sync.Mutex
	slots [pulseSlots]chan struct{}
}

func newPulse(every time.Duration, stop <-chan struct{}) *pulse {
	p := &pulse{}
	for i := range p.slots {
		p.slots[i] = make(chan struct{})
	}
	go func() {
		t := time.NewTicker(every / pulseSlots)
		defer t.Stop()
		for i := 0; ; i = (i + 1) % pulseSlots {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			p.mu.Lock()
			close(p.slots[i])
			p.slots[i] = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	return p
}

// next returns the channel that slot's next beat closes.
func (p *pulse) next(slot int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slots[slot%pulseSlots]
}

// sseOut is where a stream's bytes go: write sends them on (each call one write to the
// connection), flush pushes what a response buffered.
type sseOut interface {
	write(b []byte) error
	flush() error
	close()
}

// openSSE answers 200 with the stream's headers and returns where the stream is written: the
// connection itself, taken over from the server, for HTTP/1.x (it is closed after the stream:
// "Connection: close" ends the body), else the response.
func openSSE(w http.ResponseWriter, r *http.Request, timeout time.Duration) (sseOut, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events through as they come
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 {
		if conn, _, err := rc.Hijack(); err == nil {
			// Nothing is read from the connection again: the request's body is empty, and a client
			// that goes away is noticed by the writes.
			_ = conn.SetReadDeadline(time.Time{})
			h.Set("Connection", "close")
			var b strings.Builder
			b.WriteString("HTTP/1.1 200 OK\r\n")
			h.Write(&b)
			b.WriteString("\r\n")
			out := &connOut{conn: conn, timeout: timeout}
			if err := out.write([]byte(b.String())); err != nil {
				conn.Close()
				return nil, err
			}
			return out, nil
		}
	}
	w.WriteHeader(http.StatusOK)
	// The server's read timeout would end the stream: it reads nothing after its request.
	_ = rc.SetReadDeadline(time.Time{})
	return &responseOut{w: w, rc: rc, timeout: timeout}, nil
}

// connOut writes to a connection taken over from the server.
type connOut struct {
	conn    net.Conn
	timeout time.Duration
}

func (o *connOut) write(b []byte) error {
	_ = o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
	if _, err := o.conn.Write(b); err != nil {
		return clientGone{err}
	}
	return nil
}

func (o *connOut) flush() error { return nil }
func (o *connOut) close()       { o.conn.Close() }

// responseOut writes to the response (HTTP/2, or a server that cannot hand its connection over).
type responseOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (o *responseOut) write(b []byte) error {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if _, err := o.w.Write(b); err != nil {
		return clientGone{err}
	}
	return nil
}

// Write is write for an io.Writer (the data export writes through a buffer).
func (o *responseOut) Write(b []byte) (int, error) {
	if err := o.write(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (o *responseOut) flush() error {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if err := o.rc.Flush(); err != nil {
		return clientGone{err}
	}
	return nil
}

func (o *responseOut) close() {}

// sse writes one stream: every event after last, in order, each once. What it writes is gathered
// in buf and sent by flush, in one write.
type sse struct {
	s    *server
	out  sseOut
	user string
	last uint64  // the id of the last event sent
	buf  *[]byte // what is written and not flushed; nil when empty (an idle stream holds none)
}

// begin sends what the stream starts with: a reset, or the events the client missed.
func (st *sse) begin(ctx context.Context, start app.StreamStart) error {
	st.write("retry: 2000\n\n")
	if start.Reset {
		return st.reset(ctx)
	}
	for _, ev := range start.Events {
		st.send(ev)
	}
	st.last = start.Head
	// An id without data sets the client's last event id without an event (the SSE processing
	// model): a client that goes away before its first event resumes from here, not from now.
	st.write("id: " + strconv.FormatUint(st.last, 10) + "\n\n")
	return st.flush()
}

// deliver writes m if it is the next event, for the next flush; a later one means the bus lost
// some: they are read from the log and sent first.
func (st *sse) deliver(ctx context.Context, m *live.Message) error {
	switch {
	case m.Seq <= st.last:
		return nil // sent already (read from the log)
	case m.Seq > st.last+1:
		return st.catchUp(ctx, m.Seq)
	}
	st.send(app.StreamEvent{Seq: m.Seq, Type: m.Type, Data: m.Data})
	return nil
}

// heartbeat writes a comment line and reads what the bus may have lost.
func (st *sse) heartbeat(ctx context.Context) error {
	st.write(":\n\n")
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
		st.send(ev)
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
	st.write(fmt.Sprintf("id: %d\nevent: %s\ndata: {\"reason\":\"the events after your last id are no longer kept: refetch\"}\n\n", head, app.StreamReset))
	return st.flush()
}

// send writes ev.
func (st *sse) send(ev app.StreamEvent) {
	st.last = ev.Seq
	st.s.Metrics.StreamEvents.WithLabelValues(ev.Type).Inc()
	st.write("id: " + strconv.FormatUint(ev.Seq, 10) + "\nevent: " + ev.Type + "\ndata: " + string(ev.Data) + "\n\n")
}

// clientGone is a write to the client that failed or timed out.
type clientGone struct{ error }

// write adds s to what the next flush sends.
func (st *sse) write(s string) {
	if st.buf == nil {
		st.buf = sseBufs.Get().(*[]byte)
	}
	*st.buf = append(*st.buf, s...)
}

// flush sends what was written, in one write.
func (st *sse) flush() error {
	if st.buf != nil {
		err := st.out.write(*st.buf)
		if cap(*st.buf) <= 64<<10 {
			*st.buf = (*st.buf)[:0]
			sseBufs.Put(st.buf)
		}
		st.buf = nil
		if err != nil {
			return err
		}
	}
	return st.out.flush()
}

// sseBufs are the streams' write buffers, shared: most streams are idle most of the time.
var sseBufs = sync.Pool{New: func() any { return new([]byte) }}

// end closes a stream that failed: a client that stopped reading is counted as stalled; a failed
// read of the log is logged. Either way the client reconnects and resumes from its last id.
func (st *sse) end(err error) {
	if errors.As(err, new(clientGone)) {
		st.s.Metrics.StreamDrops.WithLabelValues("stalled").Inc()
		return
	}
	st.s.Log.Warn("a stream ended on an error", "err", err)
}
