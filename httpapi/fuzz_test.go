package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzHandler sends arbitrary methods, paths, query strings and bodies, as a user and as the
// server, to the whole handler (with users and a post in place) and requires that nothing panics
// and nothing answers 500: bad input gets a 4xx.
func FuzzHandler(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"PUT", "/v1/users/alice", `{"username":"alice"}`},
		{"POST", "/v1/posts", `{"text":"hi #go @bob","tags":["x"],"media":[{"id":"m","type":"image"}]}`},
		{"PATCH", "/v1/posts/P", `{"text":"edited","tags":null}`},
		{"GET", "/v1/users/alice/following?limit=3&cursor=abc", ""},
		{"PUT", "/v1/users/alice/following/bob", ""},
		{"POST", "/v1/posts/P/comments", `{"id":"01JD0000000000000000000000","text":"c"}`},
		{"GET", "/v1/tags/%E2%82%AC/posts?limit=-1", ""},
		{"GET", "/v1/admin/dlq/counters?cursor=%00", ""},
		{"PUT", "/v1/posts/P/likes/alice", "{}"},
		{"POST", "/v1/posts", `{"text":1e400}`},
		{"POST", "/v1/posts", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["},
		{"POST", "/v1/activities", `{"type":"daily_open","idempotency_key":"k","occurred_at":"2026-11-22T10:00:00Z","source":"web"}`},
		{"GET", "/v1/users/alice/points?days=7", ""},
		{"GET", "/v1/users/alice/streak", ""},
		{"GET", "/v1/leaderboards/authors?period=week&at=2026-11-22&limit=5", ""},
		{"GET", "/v1/leaderboards/streaks?limit=5", ""},
		{"POST", "/v1/admin/streaks/repair", `{"from":"2026-11-20T00:00:00Z","to":"2026-11-21T00:00:00Z"}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body, false)
		f.Add(s.method, s.path, s.body, true)
	}
	fx, _ := newFixture(f)
	server, alice := token(f, "app", true), token(f, "alice", false)
	for _, u := range []string{"alice", "bob"} {
		fx.want(fx.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	post := fx.do("POST", "/v1/posts", alice, `{"text":"seed #go"}`).body["id"].(string)
	f.Fuzz(func(t *testing.T, method, path, body string, asServer bool) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#") || len(path) > 2000 {
			return // not an HTTP request line a client could send
		}
		if method == "" || strings.ContainsAny(method, " \r\n\t/()<>@,;:\\\"[]?={}") {
			return
		}
		tok := alice
		if asServer {
			tok = server
		}
		req, err := http.NewRequest(method, fx.srv.URL+strings.ReplaceAll(path, "/P", "/"+post), strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, resp.StatusCode, b)
		}
	})
}
