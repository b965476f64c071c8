package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/rookery/rookery"
)

type requestIDKey struct{}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID gives every request an id: the client's X-Request-Id if it is short and printable,
// otherwise a new one. It is echoed in the response and in the access log.
func (s *server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !printable(id, 128) {
			id = s.NewID()
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// recoverPanics turns a panic in a handler into a logged Internal error: the client gets a 500
// problem and the process keeps serving.
func (s *server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.problem(w, r, rookery.E(rookery.Internal, fmt.Errorf("panic: %v\n%s", v, debug.Stack())))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over (a stream does, having answered 200 on it itself).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusOK
	}
	return conn, rw, err
}

// observe records every request's latency by route pattern and status, counts requests in flight,
// and writes the access log.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.Metrics.HTTPInFlight.Inc()
		defer s.Metrics.HTTPInFlight.Dec()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		took := time.Since(start)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		s.Metrics.HTTPDuration.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Observe(took.Seconds())
		span := trace.SpanFromContext(r.Context())
		if span.IsRecording() {
			span.SetName(route) // the pattern names the method too ("POST /v1/posts")
		}
		// Every request at debug (an import makes tens of thousands); a server error at warn.
		level := slog.LevelDebug
		if sw.status >= 500 {
			level = slog.LevelWarn
		}
		if !s.Log.Enabled(r.Context(), level) {
			return
		}
		attrs := []slog.Attr{slog.String("request_id", requestIDFrom(r.Context())),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
			slog.Int("status", sw.status), slog.Int("bytes", sw.bytes), slog.Duration("took", took)}
		if sc := span.SpanContext(); sc.IsValid() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.Log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// authed requires a valid bearer token and puts its caller in the request's context. A server
// token may name the user it acts for in X-On-Behalf-Of; any other token may not.
func (s *server) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const op rookery.Op = "httpapi.auth"
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			if s.limit(w, r, nil) {
				s.problem(w, r, rookery.E(op, rookery.Unauthenticated, "no bearer token: send Authorization: Bearer <token>"))
			}
			return
		}
		c, err := s.Verifier.Verify(strings.TrimSpace(token))
		if err != nil {
			if s.limit(w, r, nil) {
				s.problem(w, r, err)
			}
			return
		}
		if obo := r.Header.Get("X-On-Behalf-Of"); obo != "" {
			switch {
			case !c.Server:
				s.problem(w, r, rookery.E(op, rookery.Forbidden, "only a server token may use X-On-Behalf-Of"))
				return
			case !rookery.ValidUserID(obo):
				s.problem(w, r, rookery.FieldErrors{{Name: "X-On-Behalf-Of", Reason: "must be a user id"}}.Err(op))
				return
			}
			c.OnBehalfOf = obo
		}
		if !s.limit(w, r, &c) {
			return
		}
		h(w, r.WithContext(rookery.WithCaller(r.Context(), c)))
	})
}

// outlast readies a handler that may work longer than the server's timeouts allow a whole request
// (they run from its start): a backup, a repair, a data export. The request is read, so its read
// deadline is lifted (past it the server would cancel the request; a client that goes away still
// does). The returned reply gives the reply's writing a write timeout of its own: call it when the
// work is done, before replying.
func (s *server) outlast(w http.ResponseWriter) (reply func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	return func() { _ = rc.SetWriteDeadline(time.Now().Add(s.writeTimeout())) }
}

// writeTimeout is how long one write of a long reply may take.
func (s *server) writeTimeout() time.Duration { return cmp.Or(s.WriteTimeout, time.Minute) }
