package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testenv"
)

// limited sends one request and returns its status, its rate-limit fields and its problem code.
func limited(t *testing.T, method, url, tok string, body ...string) (status int, h http.Header, code string) {
	t.Helper()
	resp := send(t, method, url, tok, strings.Join(body, ""))
	defer resp.Body.Close()
	var p struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, resp.Header, p.Code
}

// checkFields checks the IETF and X-RateLimit-* fields of a reply under policy name (quota q per w).
func checkFields(t *testing.T, h http.Header, name string, q, w, remaining int) {
	t.Helper()
	if got, want := h.Get("RateLimit-Policy"), fmt.Sprintf("%q;q=%d;w=%d", name, q, w); got != want {
		t.Errorf("RateLimit-Policy = %q; want %q", got, want)
	}
	if got, prefix := h.Get("RateLimit"), fmt.Sprintf("%q;r=%d;t=", name, remaining); !strings.HasPrefix(got, prefix) {
		t.Errorf("RateLimit = %q; want %q...", got, prefix)
	}
	if h.Get("X-RateLimit-Limit") != strconv.Itoa(q) || h.Get("X-RateLimit-Remaining") != strconv.Itoa(remaining) {
		t.Errorf("X-RateLimit-Limit %q, -Remaining %q; want %d, %d", h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), q, remaining)
	}
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if now := time.Now().Unix(); err != nil || reset < now || reset > now+int64(w)+1 {
		t.Errorf("X-RateLimit-Reset = %q; want a Unix time within the window", h.Get("X-RateLimit-Reset"))
	}
}

// TestRateLimitsEndToEnd drives callers over their limits through a real server: a user's reads,
// then writes (a class of their own), a server token (a bucket of its own), and requests without a
// valid token (per address). Then two API processes with --cache redis share one count.
func TestRateLimitsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--rate-read", "5/1m", "--rate-write", "2/1m", "--rate-anonymous", "3/1m", "--rate-server", "50/1m")
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	if st, h, _ := limited(t, "PUT", srv.url+"/v1/users/ann", server, `{"username":"ann"}`); st != 201 {
		t.Fatalf("PUT ann = %d", st)
	} else {
		checkFields(t, h, "server", 50, 60, 49)
	}
	for i := range 5 {
		st, h, _ := limited(t, "GET", srv.url+"/v1/users/ann", tok)
		if st != 200 {
			t.Fatalf("read %d = %d", i+1, st)
		}
		checkFields(t, h, "read", 5, 60, 4-i)
	}
	st, h, code := limited(t, "GET", srv.url+"/v1/feed", tok)
	if st != 429 || code != "rate_limited" {
		t.Fatalf("read 6 = %d %q; want 429 rate_limited", st, code)
	}
	checkFields(t, h, "read", 5, 60, 0)
	// One read's share of the window (12 s) comes back first.
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 10 || ra > 12 {
		t.Fatalf("Retry-After = %q; want about 12", h.Get("Retry-After"))
	}
	// Writes are a class of their own; the server token a bucket of its own.
	for i := range 2 {
		if st, h, _ := limited(t, "PUT", srv.url+"/v1/users/ann/mutes/nobody", tok); st == 429 {
			t.Fatalf("write %d refused", i+1)
		} else {
			checkFields(t, h, "write", 2, 60, 1-i)
		}
	}
	if st, _, _ := limited(t, "DELETE", srv.url+"/v1/users/ann/mutes/nobody", tok); st != 429 {
		t.Fatalf("write 3 = %d; want 429", st)
	}
	if st, _, _ := limited(t, "GET", srv.url+"/v1/users/ann", server); st != 200 {
		t.Fatalf("the server token's read = %d", st)
	}
	// Without a valid token: 401 until the address's limit, then 429.
	for i, bad := range []string{"", "not-a-token", tok + "x"} {
		st, h, _ := limited(t, "GET", srv.url+"/v1/feed", bad)
		if st != 401 {
			t.Fatalf("anonymous %d = %d; want 401", i+1, st)
		}
		checkFields(t, h, "anonymous", 3, 60, 2-i)
	}
	if st, _, code := limited(t, "GET", srv.url+"/v1/feed", ""); st != 429 || code != "rate_limited" {
		t.Fatalf("anonymous 4 = %d %q; want 429", st, code)
	}
	// The operations routes are not limited.
	for range 10 {
		if st, _, _ := limited(t, "GET", srv.url+"/healthz", ""); st != 200 {
			t.Fatalf("healthz = %d", st)
		}
	}

	t.Run("behind a trusted proxy, per client address it forwards", func(t *testing.T) {
		anon := func(base, forwardedFor string) int {
			req, _ := http.NewRequest("GET", base+"/v1/feed", nil)
			req.Header.Set("X-Forwarded-For", forwardedFor)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		// The tests' requests come from 127.0.0.1: as a load balancer would, they say whom for.
		behind := start(t, map[string]string{"ROOKERY_TRUSTED_PROXIES": "10.0.0.0/8,127.0.0.1"}, "--data-dir", t.TempDir(), "--rate-anonymous", "2/1m")
		for i, xff := range []string{"203.0.113.1", "6.6.6.6, 203.0.113.1", "203.0.113.1", "203.0.113.2"} {
			want := []int{401, 401, 429, 401}[i] // the third is 203.0.113.1's third (what it wrote on the left proves nothing)
			if got := anon(behind.url, xff); got != want {
				t.Fatalf("request %d, X-Forwarded-For %q = %d; want %d", i+1, xff, got, want)
			}
		}
		// Without the setting, X-Forwarded-For is the client's word: ignored.
		direct := start(t, nil, "--data-dir", t.TempDir(), "--rate-anonymous", "2/1m")
		for i, xff := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
			if got, want := anon(direct.url, xff), []int{401, 401, 429}[i]; got != want {
				t.Fatalf("without trusted proxies, request %d = %d; want %d", i+1, got, want)
			}
		}
		if err := run(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--trusted-proxies", "lb.internal"}, env(nil), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--trusted-proxies") {
			t.Fatalf("a host name as a trusted proxy: %v; want an error naming --trusted-proxies", err)
		}
	})

	t.Run("shared by API processes through Redis", func(t *testing.T) {
		prefix := redisPrefix(t)
		vars := map[string]string{"ROOKERY_AUTH_SECRET": strings.Repeat("s", 32), "ROOKERY_CACHE": "redis",
			"ROOKERY_REDIS_ADDR": testenv.RedisAddr(), "ROOKERY_REDIS_PREFIX": prefix, "ROOKERY_RATE_READ": "4/1m"}
		a := start(t, vars, "--data-dir", t.TempDir())
		b := start(t, vars, "--data-dir", t.TempDir())
		tok := strings.TrimSpace(command(t, vars, "token", "--sub", "bob"))
		for i := range 4 {
			url := []string{a.url, b.url}[i%2]
			st, h, _ := limited(t, "GET", url+"/v1/leaderboards/streaks", tok)
			if st != 200 {
				t.Fatalf("read %d = %d", i+1, st)
			}
			checkFields(t, h, "read", 4, 60, 3-i)
		}
		for _, url := range []string{a.url, b.url} {
			if st, _, _ := limited(t, "GET", url+"/v1/leaderboards/streaks", tok); st != 429 {
				t.Fatalf("read 5 on %s = %d; want 429 (the count is shared)", url, st)
			}
		}
	})
}
