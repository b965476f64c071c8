package rookery

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retrying sends a request again when it is answered 429 or 503, or not answered, or 409 with a
// Retry-After (its Idempotency-Key's first request still runs), if it is safe to repeat: a read, or
// a write with an Idempotency-Key. The creating POSTs (a post, a comment) get a
// key when they have none, so that their retries cannot create twice.
type retrying struct {
	next    http.RoundTripper
	retries int
	maxWait time.Duration
}

func creates(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/v1/posts" || strings.HasSuffix(r.URL.Path, "/comments"))
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	if creates(req) && req.Header.Get("Idempotency-Key") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Idempotency-Key", NewIdempotencyKey())
	}
	safe := req.Method == http.MethodGet || req.Method == http.MethodHead || req.Header.Get("Idempotency-Key") != ""
	for attempt := 0; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if !safe || attempt >= t.retries || req.Body != nil && req.GetBody == nil {
			return resp, err
		}
		wait := time.Duration(100<<attempt) * time.Millisecond
		switch {
		case err != nil:
			if req.Context().Err() != nil {
				return resp, err
			}
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable ||
			// a key whose first request (one that got no answer, say) still runs
			resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "":
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
			if wait > t.maxWait {
				return resp, nil // longer than the caller wants to wait: theirs to decide
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		default:
			return resp, nil
		}
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(wait):
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}
