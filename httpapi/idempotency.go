package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// idempotent wraps a create route with Idempotency-Key handling (API.md): the first request with a
// key runs and its result is remembered; a retry with the same key and body gets the same status
// and body without running again; the same key with another body, or while the first still runs,
// gets 409. Without the header the route runs as it is.
func (s *server) idempotent(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			h(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			s.problem(w, r, errTooLarge)
			return
		}
		replay, err := s.App.BeginIdempotent(r.Context(), key, body)
		if err != nil {
			s.problem(w, r, err)
			return
		}
		if replay != nil {
			ct := "application/json"
			if replay.Status >= 400 { // a remembered problem stays one
				ct = "application/problem+json"
			}
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(replay.Status)
			w.Write(replay.Body)
			return
		}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(rec, r)
		// Record even if the client went away: its retry must find the result.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.App.FinishIdempotent(ctx, key, rec.status, rec.body.Bytes()); err != nil {
			s.Log.Warn("recording an idempotent result failed; a retry will run again", "err", err)
		}
	}
}

// recorder passes a response through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
