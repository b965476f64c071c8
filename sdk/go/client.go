// Package rookery is the Go SDK of Rookery's HTTP API (docs/api.md). Package api, generated from
// docs/openapi.json, has a type per schema and a method per operation; this package adds what a
// generator does not give: options, tokens for an app's backend, iterators over lists, retries of
// 429 and 503 that honour Retry-After, typed errors, the live stream with resume, and webhook
// verification.
package rookery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rookery/rookery/sdk/go/api"
)

// Client is Rookery's API: the generated operations (package api: one method per operation, named
// by its operationId, such as GetHomeFeedWithResponse) and the helpers of this package (iterators,
// the stream, typed errors).
type Client struct {
	*api.ClientWithResponses
	base       string
	editors    []api.RequestEditorFn // the token's
	streamHTTP *http.Client          // the HTTP client without its timeout
	longHTTP   *http.Client          // the same, retrying: for the export, which reads for as long as it takes
	idle       time.Duration         // the HTTP client's timeout: how long the export may wait for its next bytes
	streamIdle time.Duration         // how long a stream's connection may bring nothing
}

type options struct {
	token      func(ctx context.Context) (string, error)
	httpClient *http.Client
	retries    int
	maxWait    time.Duration
	streamIdle time.Duration
}

// An Option configures a Client.
type Option func(*options)

// WithToken authenticates every request with a fixed bearer token (a user's, or a server token).
func WithToken(token string) Option {
	return WithTokenSource(func(context.Context) (string, error) { return token, nil })
}

// WithTokenSource asks src for the bearer token of each request (to refresh short-lived tokens).
func WithTokenSource(src func(ctx context.Context) (string, error)) Option {
	return func(o *options) { o.token = src }
}

// WithHTTPClient sends requests with c (its Transport is wrapped for retries; default: a client
// with a 30 s timeout). The timeout bounds each call but Stream, which stays open, and Export,
// which may read for longer and gets it for each wait for data instead.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetries sets how many times a request answered 429 or 503 (or not answered) is sent again,
// after its Retry-After (at most maxWait; default 4 retries, 30 s). Only requests that are safe to
// repeat are: reads, and writes that carry an Idempotency-Key (the client adds one to the creating
// POSTs that lack it). 0 turns retries off.
func WithRetries(n int, maxWait time.Duration) Option {
	return func(o *options) { o.retries, o.maxWait = n, maxWait }
}

// WithStreamTimeout sets how long a stream's connection may bring nothing, not even the server's
// heartbeat, before Stream takes it for dead (a network that dropped it without closing it, a
// paused server) and resumes on a new one. Default 45 s: three of the server's default heartbeats
// (--stream-heartbeat 15s); keep it above twice the server's. 0: never.
func WithStreamTimeout(d time.Duration) Option { return func(o *options) { o.streamIdle = d } }

// New returns a Client of the Rookery server at baseURL (such as http://127.0.0.1:8080).
func New(baseURL string, opts ...Option) (*Client, error) {
	o := options{retries: 4, maxWait: 30 * time.Second, streamIdle: 45 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	hc := o.httpClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	wrapped := *hc
	base := wrapped.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	wrapped.Transport = &retrying{next: base, retries: o.retries, maxWait: o.maxWait}
	var auth []api.RequestEditorFn
	if o.token != nil {
		auth = append(auth, func(ctx context.Context, req *http.Request) error {
			tok, err := o.token(ctx)
			if err != nil {
				return fmt.Errorf("rookery: the token source failed: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			if user, ok := ctx.Value(actingKey{}).(string); ok {
				req.Header.Set("X-On-Behalf-Of", user)
			}
			return nil
		})
	}
	opts2 := []api.ClientOption{api.WithHTTPClient(&wrapped)}
	for _, e := range auth {
		opts2 = append(opts2, api.WithRequestEditorFn(e))
	}
	c, err := api.NewClientWithResponses(baseURL, opts2...)
	if err != nil {
		return nil, err
	}
	streamHTTP, longHTTP := *hc, wrapped
	streamHTTP.Timeout, longHTTP.Timeout = 0, 0
	return &Client{ClientWithResponses: c, base: strings.TrimRight(baseURL, "/"), editors: auth,
		streamHTTP: &streamHTTP, longHTTP: &longHTTP, idle: hc.Timeout, streamIdle: o.streamIdle}, nil
}

type actingKey struct{}

// ActingAs returns ctx with which requests made with a server token act for user
// (X-On-Behalf-Of).
func ActingAs(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, actingKey{}, user)
}

// NewIdempotencyKey returns a random Idempotency-Key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Error is a problem+json reply (docs/api.md): Code is one of invalid, unauthenticated,
// forbidden, not_found, conflict, too_large, rate_limited, unavailable, internal.
type Error struct {
	Status     int
	Code       string
	Title      string
	Detail     string
	Fields     []FieldError // for invalid: each bad field
	RequestID  string
	RetryAfter time.Duration // for rate_limited and unavailable
}

// FieldError names a bad field of a request.
type FieldError struct{ Name, Reason string }

func (e *Error) Error() string {
	return fmt.Sprintf("rookery: %d %s: %s", e.Status, e.Code, e.Detail)
}

// IsCode reports whether err is a Rookery Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
