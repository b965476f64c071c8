package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/internal/progress"
)

// apiClient calls a running server's HTTP API (the commands that work through the server: dlq,
// import) with a server token minted from the same configuration as `serve`.
type apiClient struct {
	base, token string
	http        *http.Client
}

// newAPIClient returns a client of the server at base that keeps up to conns connections open.
func newAPIClient(cfg *config, base string, conns int) (*apiClient, error) {
	secret, err := cfg.secret(false)
	if err != nil {
		return nil, err
	}
	if secret == nil {
		return nil, errors.New("no secret configured to mint a server token: set --auth-secret (ROOKERY_AUTH_SECRET)")
	}
	tok, err := auth.Mint(secret, "rookery-cli", true, 24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	return &apiClient{base: strings.TrimRight(base, "/"), token: tok, http: &http.Client{Transport: tr, Timeout: time.Minute}}, nil
}

// do sends a request with body (nil for none) and returns the reply's body; a reply of 300 or more
// is an error with the problem's detail (and, as *statusError, the status).
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is the server running at %s? %w", c.base, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var p struct{ Detail string }
		json.Unmarshal(out, &p)
		return nil, &statusError{status: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, p.Detail)}
	}
	return out, nil
}

// doLong sends a request that may take minutes (a backup, a streak repair): without the client's
// timeout (Ctrl-C cancels it), writing a line to progress every few seconds while the server, which
// says nothing until it is done, works.
func (c *apiClient) doLong(ctx context.Context, method, path string, body []byte, doing string, progressOut io.Writer) ([]byte, error) {
	long := *c
	hc := *c.http
	hc.Timeout = 0
	long.http = &hc
	done, stopped, every := make(chan struct{}), make(chan struct{}), progressEvery
	defer func() { close(done); <-stopped }() // no line after the reply
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for start := time.Now(); ; {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(progressOut, "%s: %s so far\n", doing, time.Since(start).Round(time.Second))
			}
		}
	}()
	return long.do(ctx, method, path, body)
}

// progressEvery is progress.Every; a variable for tests.
var progressEvery = progress.Every

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// waitDrained waits until the server's consumers have caught up with the event log (the sum of
// rookery_consumer_lag_events on /metrics is 0), printing how far behind they are every second;
// an error after timeout. A server that runs no consumers (--role api) reports no lag: no wait.
func (c *apiClient) waitDrained(ctx context.Context, timeout time.Duration, out io.Writer) error {
	start := time.Now()
	for {
		f, err := c.serverFigures(ctx)
		if err != nil {
			return err
		}
		behind := f.behind
		if behind == 0 {
			fmt.Fprintf(out, "\nconsumers caught up in %s\n", time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("the server's consumers are still %.0f events behind after %s", behind, timeout)
		}
		fmt.Fprintf(out, "\rconsumers %.0f events behind (%s)", behind, time.Since(start).Round(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
