package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// withOrigin sends a request as a page of origin would (a preflight: OPTIONS with the method and
// headers it asks for).
func withOrigin(t *testing.T, method, url, tok, origin string, preflight ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if len(preflight) == 2 {
		req.Header.Set("Access-Control-Request-Method", preflight[0])
		req.Header.Set("Access-Control-Request-Headers", preflight[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORSEndToEnd: with ROOKERY_CORS_ORIGINS, a real server answers the allowed origins'
// preflights (without a token, and without drawing on any rate limit) and lets their pages read
// replies and the fields clients need; other origins and servers without the setting send no CORS
// field. (web's TestCrossOriginInABrowser checks the same in Chromium.)
func TestCORSEndToEnd(t *testing.T) {
	const app, other = "https://app.example.com", "https://evil.example.net"
	dir := t.TempDir()
	srv := start(t, map[string]string{"ROOKERY_CORS_ORIGINS": app + ",http://localhost:3000"}, "--data-dir", dir, "--rate-anonymous", "2/1m")
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	if resp := send(t, "PUT", srv.url+"/v1/users/ann", tok, `{"username":"ann"}`); resp.StatusCode != 201 {
		t.Fatalf("PUT ann = %d", resp.StatusCode)
	}

	for range 5 {
		resp := withOrigin(t, "OPTIONS", srv.url+"/v1/posts", "", app, "POST", "authorization, content-type, idempotency-key")
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != app || !strings.Contains(h.Get("Vary"), "Origin") {
			t.Fatalf("preflight = %d %v; want 204 allowing %s", resp.StatusCode, h, app)
		}
		for _, want := range []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Headers"), want) {
				t.Errorf("preflight allows headers %q; want %s among them", h.Get("Access-Control-Allow-Headers"), want)
			}
		}
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "PATCH") || h.Get("Access-Control-Max-Age") == "" {
			t.Errorf("preflight: methods %q, max age %q", h.Get("Access-Control-Allow-Methods"), h.Get("Access-Control-Max-Age"))
		}
	}
	// The five preflights drew nothing from the anonymous limit (2 a minute).
	if st, h, _ := limited(t, "GET", srv.url+"/v1/feed", ""); st != 401 {
		t.Fatalf("a request without a token after the preflights = %d; want 401", st)
	} else {
		checkFields(t, h, "anonymous", 2, 60, 1)
	}

	resp := withOrigin(t, "GET", srv.url+"/v1/users/ann", tok, app)
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != app {
		t.Fatalf("GET from %s = %d, Access-Control-Allow-Origin %q", app, resp.StatusCode, h.Get("Access-Control-Allow-Origin"))
	}
	for _, want := range []string{"X-RateLimit-Remaining", "RateLimit", "Retry-After", "X-Request-Id", "Idempotent-Replayed"} {
		if !strings.Contains(h.Get("Access-Control-Expose-Headers"), want) {
			t.Errorf("exposed headers %q; want %s among them", h.Get("Access-Control-Expose-Headers"), want)
		}
	}
	if got := withOrigin(t, "GET", srv.url+"/v1/users/ann", tok, "http://localhost:3000").Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:3000" {
		t.Errorf("the second origin: Access-Control-Allow-Origin %q", got)
	}

	// Another origin, or none: no CORS field; its preflight is an unknown method as before.
	if resp := withOrigin(t, "GET", srv.url+"/v1/users/ann", tok, other); resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode != 200 {
		t.Errorf("GET from %s = %d, Access-Control-Allow-Origin %q; want none", other, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := withOrigin(t, "OPTIONS", srv.url+"/v1/posts", "", other, "POST", "authorization"); resp.StatusCode != 405 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from %s = %d, Access-Control-Allow-Origin %q; want 405 and none", other, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := withOrigin(t, "GET", srv.url+"/v1/users/ann", tok, ""); resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Errorf("GET without Origin: Access-Control-Allow-Origin %q, Vary %q; want none, and Vary: Origin", resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Vary"))
	}

	t.Run("any origin", func(t *testing.T) {
		dir := t.TempDir()
		srv := start(t, nil, "--data-dir", dir, "--cors-origins", "*")
		tok := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
		if got := withOrigin(t, "GET", srv.url+"/v1/feed", tok, other).Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("Access-Control-Allow-Origin %q; want *", got)
		}
	})
	t.Run("none by default", func(t *testing.T) {
		dir := t.TempDir()
		srv := start(t, nil, "--data-dir", dir)
		tok := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
		if got := withOrigin(t, "GET", srv.url+"/v1/feed", tok, app).Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin %q; want none", got)
		}
	})
	t.Run("a value that is not an origin is refused at start", func(t *testing.T) {
		err := run(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--cors-origins", "https://app.example.com/feed"}, env(nil), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--cors-origins") {
			t.Fatalf("serve with a path as an origin: %v; want an error naming --cors-origins", err)
		}
	})
}
