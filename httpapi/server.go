// Package httpapi is Rookery's HTTP API (API.md): NewServer returns the handler; every route is in
// routes.go; requests are decoded in one place and responses and errors encoded in another
// (encode.go), with one table from error Kind to HTTP status.
package httpapi

import (
	"context"

	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/metrics"
)

// Deps are what the server needs.
type Deps struct {
	App      *app.App
	Verifier *auth.Verifier
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	// NewID returns a fresh request id (cmd passes ULIDs).
	NewID func() string
	// Ready lists the checks of /readyz by name: each backend the process uses.
	Ready map[string]func(context.Context) error
	// Streams configure GET /v1/stream.
	Streams StreamOptions
	// Limits are the rate limits of the /v1 routes; nil: none.
	Limits *RateLimits
	// Backup backs the embedded store up (POST /v1/admin/backup); nil: there is none.
	Backup Backup
	// Tracing, if set, makes every request a span of its, continuing the client's W3C trace
	// context; the events a request causes carry it on (events.TraceParent).
	Tracing trace.TracerProvider
	// CORS says which other origins' pages may call the API (none by default).
	CORS CORS
	// WriteTimeout is how long one write of a long reply (a data export) may take: the server's
	// own write timeout covers a whole reply. 0: a minute.
	WriteTimeout time.Duration
}

// NewServer returns the API's handler.
func NewServer(d Deps) http.Handler {
	s := &server{Deps: d, mux: http.NewServeMux()}
	s.routes()
	var h http.Handler = s.mux
	h = s.observe(h)
	h = s.recoverPanics(h)
	h = s.requestID(h)
	if d.Tracing != nil {
		h = otelhttp.NewHandler(h, "http", otelhttp.WithTracerProvider(d.Tracing), otelhttp.WithPropagators(propagation.TraceContext{}))
	}
	return s.cors(h)
}

type server struct {
	Deps
	mux *http.ServeMux

	pulseOnce sync.Once // the streams' heartbeat pulse starts with the first stream
	beats     *pulse
	streamSeq atomic.Int64 // spreads the streams over the pulse's slots
}
