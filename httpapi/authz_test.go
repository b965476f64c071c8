package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
)

// TestAuthorizationMatrix walks every /v1 route with every kind of caller: the owner of the data,
// another user, a follower of the owner, a user the owner blocked, the server, and no token. Each
// cell is the status that caller gets. The test reads routes.go and fails for a route without a
// row, so a new route cannot skip this table.
func TestAuthorizationMatrix(t *testing.T) {
	f, _ := newFixture(t)
	ctx := context.Background()
	server := token(t, "app", true)
	for _, u := range []string{"owner", "other", "follower", "blocked"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	tok := map[string]string{
		"owner": token(t, "owner", false), "other": token(t, "other", false),
		"follower": token(t, "follower", false), "blocked": token(t, "blocked", false), "server": server,
	}
	f.want(f.do("PUT", "/v1/users/follower/following/owner", tok["follower"], ""), 200, "")
	f.want(f.do("PUT", "/v1/users/owner/blocks/blocked", tok["owner"], ""), 204, "")
	pub := f.do("POST", "/v1/posts", tok["owner"], `{"text":"public #m"}`).body["id"].(string)
	priv := f.do("POST", "/v1/posts", tok["owner"], `{"text":"followers only","visibility":"followers"}`).body["id"].(string)
	comment := func(by string) string {
		return f.do("POST", "/v1/posts/"+pub+"/comments", tok[by], `{"text":"c"}`).body["id"].(string)
	}
	c1, c2, c3 := comment("follower"), comment("follower"), comment("follower")
	for _, id := range []string{"dl1", "dl2"} {
		if err := f.evlog.DeadLetter(ctx, "fanout", events.DeadLetter{Event: eventstest.Event(id, "k", 1), Error: "x"}); err != nil {
			t.Fatal(err)
		}
	}

	wh := f.do("POST", "/v1/webhooks", server, `{"url":"https://hooks.example.com/h","events":["post.created"]}`).body["id"].(string)

	type cell = map[string]int // caller -> status; "none" is no token
	rows := []struct {
		route, method, path, body string
		want                      cell
	}{
		// The owner's own data: only the owner (or the server) may change it.
		{"PUT /v1/users/{id}", "PUT", "/v1/users/owner", `{"username":"owner"}`, cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"PUT /v1/users/{id}/following/{target}", "PUT", "/v1/users/owner/following/other", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"DELETE /v1/users/{id}/following/{target}", "DELETE", "/v1/users/owner/following/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"PUT /v1/users/{id}/mutes/{target}", "PUT", "/v1/users/owner/mutes/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"DELETE /v1/users/{id}/mutes/{target}", "DELETE", "/v1/users/owner/mutes/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"PUT /v1/users/{id}/blocks/{target}", "PUT", "/v1/users/owner/blocks/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"DELETE /v1/users/{id}/blocks/{target}", "DELETE", "/v1/users/owner/blocks/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		// A user's blocks and mutes are theirs alone: only they and the server may read them.
		{"GET /v1/users/{id}/blocks/{target}", "GET", "/v1/users/owner/blocks/blocked", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/blocks", "GET", "/v1/users/owner/blocks", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/mutes/{target}", "GET", "/v1/users/owner/mutes/other", "", cell{"owner": 404, "other": 403, "follower": 403, "blocked": 403, "server": 404, "none": 401}},
		{"GET /v1/users/{id}/mutes", "GET", "/v1/users/owner/mutes", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		// Following the owner: the blocked user may not.
		{"PUT /v1/users/{id}/following/{target}", "PUT", "/v1/users/{caller}/following/owner", "", cell{"follower": 200, "blocked": 403, "none": 401}},
		// Profiles and the graph: any authenticated caller.
		{"DELETE /v1/users/{id}", "DELETE", "/v1/users/owner", "", cell{"other": 403, "follower": 403, "blocked": 403, "none": 401}},
		{"GET /v1/users/{id}", "GET", "/v1/users/owner", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET /v1/usernames/{username}", "GET", "/v1/usernames/owner", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/following/{target}", "GET", "/v1/users/follower/following/owner", "", cell{"owner": 200, "other": 200, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/following", "GET", "/v1/users/follower/following", "", cell{"owner": 200, "other": 200, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/followers", "GET", "/v1/users/owner/followers", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 200, "server": 200, "none": 401}},
		// Posting: as oneself; a server token must name the user.
		{"POST /v1/posts", "POST", "/v1/posts", `{"text":"new"}`, cell{"other": 201, "blocked": 201, "server": 400, "none": 401}},
		// A public post: hidden from the blocked user, who may not like or comment on it.
		{"GET /v1/posts/{id}", "GET", "/v1/posts/" + pub, "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/posts", "GET", "/v1/users/owner/posts", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET /v1/tags/{tag}/posts", "GET", "/v1/tags/m/posts", "", cell{"owner": 200, "blocked": 200, "server": 200, "none": 401}},
		// The home feed is the caller's own; a server token must name the reader.
		{"GET /v1/feed", "GET", "/v1/feed", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 200, "server": 400, "none": 401}},
		// A stream is the caller's own (a user's 200 is an open stream: TestStreamTickets and the rest).
		{"GET /v1/stream", "GET", "/v1/stream", "", cell{"server": 400, "none": 401}},
		{"POST /v1/stream/tickets", "POST", "/v1/stream/tickets", "", cell{"owner": 201, "other": 201, "server": 400, "none": 401}},
		{"PUT /v1/posts/{id}/likes/{user}", "PUT", "/v1/posts/" + pub + "/likes/{caller}", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 403, "none": 401}},
		{"DELETE /v1/posts/{id}/likes/{user}", "DELETE", "/v1/posts/" + pub + "/likes/{caller}", "", cell{"owner": 204, "other": 204, "blocked": 403, "none": 401}},
		{"PUT /v1/posts/{id}/likes/{user}", "PUT", "/v1/posts/" + pub + "/likes/owner", "", cell{"other": 403, "follower": 403, "blocked": 403, "none": 401}},
		{"GET /v1/posts/{id}/likes", "GET", "/v1/posts/" + pub + "/likes", "", cell{"owner": 200, "other": 200, "blocked": 404, "server": 200, "none": 401}},
		{"POST /v1/posts/{id}/comments", "POST", "/v1/posts/" + pub + "/comments", `{"text":"hi"}`, cell{"owner": 201, "other": 201, "follower": 201, "blocked": 403, "none": 401}},
		{"GET /v1/posts/{id}/comments", "GET", "/v1/posts/" + pub + "/comments", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"PATCH /v1/posts/{id}", "PATCH", "/v1/posts/" + pub, `{"text":"edited"}`, cell{"owner": 200, "other": 403, "follower": 403, "blocked": 404, "none": 401}},
		// Activities are the caller's own (a server token must name the user); a streak and the
		// leaderboards are public to any authenticated caller, the points history to its owner.
		{"POST /v1/activities", "POST", "/v1/activities", `{"type":"daily_open","idempotency_key":"k1"}`, cell{"owner": 201, "other": 201, "blocked": 201, "server": 400, "none": 401}},
		{"GET /v1/users/{id}/streak", "GET", "/v1/users/owner/streak", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/points", "GET", "/v1/users/owner/points", "", cell{"owner": 200, "other": 403, "blocked": 403, "server": 200, "none": 401}},
		{"GET /v1/leaderboards/streaks", "GET", "/v1/leaderboards/streaks", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET /v1/leaderboards/authors", "GET", "/v1/leaderboards/authors?period=week", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 200, "none": 401}},
		{"POST /v1/admin/streaks/repair", "POST", "/v1/admin/streaks/repair", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T01:00:00Z"}`, cell{"owner": 403, "other": 403, "server": 200, "none": 401}},
		{"GET /v1/users/{id}/export", "GET", "/v1/users/owner/export", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		// The fixture has no embedded store to back up (cmd's tests back one up): 404 once authorized.
		{"POST /v1/admin/backup", "POST", "/v1/admin/backup", "", cell{"owner": 403, "other": 403, "server": 404, "none": 401}},
		// A comment: its author, the post's author, or the server may delete it; nobody else.
		{"DELETE /v1/posts/{id}/comments/{comment}", "DELETE", "/v1/posts/" + pub + "/comments/" + c1, "", cell{"other": 403, "blocked": 404, "none": 401, "follower": 204}},
		{"DELETE /v1/posts/{id}/comments/{comment}", "DELETE", "/v1/posts/" + pub + "/comments/" + c2, "", cell{"owner": 204}},
		{"DELETE /v1/posts/{id}/comments/{comment}", "DELETE", "/v1/posts/" + pub + "/comments/" + c3, "", cell{"server": 204}},
		// A followers post: the owner, followers and the server only, on every route.
		{"GET /v1/posts/{id}", "GET", "/v1/posts/" + priv, "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"GET /v1/posts/{id}/likes", "GET", "/v1/posts/" + priv + "/likes", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"GET /v1/posts/{id}/comments", "GET", "/v1/posts/" + priv + "/comments", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"PUT /v1/posts/{id}/likes/{user}", "PUT", "/v1/posts/" + priv + "/likes/{caller}", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 403, "none": 401}},
		{"POST /v1/posts/{id}/comments", "POST", "/v1/posts/" + priv + "/comments", `{"text":"hi"}`, cell{"owner": 201, "other": 404, "follower": 201, "blocked": 403, "none": 401}},
		// Notifications are always the caller's own; a server token must name the user.
		{"GET /v1/notifications", "GET", "/v1/notifications", "", cell{"owner": 200, "other": 200, "blocked": 200, "server": 400, "none": 401}},
		{"GET /v1/notifications/unread_count", "GET", "/v1/notifications/unread_count", "", cell{"owner": 200, "other": 200, "server": 400, "none": 401}},
		{"POST /v1/notifications/read", "POST", "/v1/notifications/read", `{"all":true}`, cell{"owner": 204, "other": 204, "server": 400, "none": 401}},
		// Administration: server tokens only.
		{"GET /v1/admin/dlq/{group}", "GET", "/v1/admin/dlq/fanout", "", cell{"owner": 403, "other": 403, "blocked": 403, "server": 200, "none": 401}},
		{"GET /v1/admin/dlq/{group}/{id}", "GET", "/v1/admin/dlq/fanout/dl1", "", cell{"owner": 403, "follower": 403, "server": 200, "none": 401}},
		{"POST /v1/admin/dlq/{group}/{id}/replay", "POST", "/v1/admin/dlq/fanout/dl1/replay", "", cell{"owner": 403, "other": 403, "none": 401, "server": 204}},
		{"DELETE /v1/admin/dlq/{group}/{id}", "DELETE", "/v1/admin/dlq/fanout/dl2", "", cell{"owner": 403, "other": 403, "none": 401, "server": 204}},
		// Webhook endpoints: the server only.
		{"POST /v1/webhooks", "POST", "/v1/webhooks", `{"url":"https://hooks.example.com/2","events":["like.created"]}`, cell{"owner": 403, "other": 403, "server": 201, "none": 401}},
		{"GET /v1/webhooks", "GET", "/v1/webhooks", "", cell{"owner": 403, "follower": 403, "server": 200, "none": 401}},
		{"GET /v1/webhooks/{id}", "GET", "/v1/webhooks/" + wh, "", cell{"owner": 403, "other": 403, "server": 200, "none": 401}},
		{"PATCH /v1/webhooks/{id}", "PATCH", "/v1/webhooks/" + wh, `{"enabled":false}`, cell{"owner": 403, "blocked": 403, "server": 200, "none": 401}},
		{"POST /v1/webhooks/{id}/rotate", "POST", "/v1/webhooks/" + wh + "/rotate", "", cell{"owner": 403, "server": 200, "none": 401}},
		{"POST /v1/webhooks/{id}/test", "POST", "/v1/webhooks/" + wh + "/test", "", cell{"other": 403, "server": 202, "none": 401}},
		{"DELETE /v1/webhooks/{id}", "DELETE", "/v1/webhooks/" + wh, "", cell{"owner": 403, "other": 403, "none": 401, "server": 204}},
		// Deleting a post: its author or the server (last, as it removes the post).
		{"DELETE /v1/posts/{id}", "DELETE", "/v1/posts/" + priv, "", cell{"other": 404, "follower": 403, "blocked": 404, "none": 401}},
		{"DELETE /v1/posts/{id}", "DELETE", "/v1/posts/" + priv, "", cell{"owner": 204}},
		{"DELETE /v1/posts/{id}", "DELETE", "/v1/posts/" + pub, "", cell{"server": 204}},
	}
	covered := map[string]bool{}
	order := []string{"none", "blocked", "other", "follower", "owner", "server"}
	for _, row := range rows {
		covered[row.route] = true
		for _, who := range order {
			want, ok := row.want[who]
			if !ok {
				continue
			}
			path := strings.ReplaceAll(row.path, "{caller}", who)
			r := f.do(row.method, path, tok[who], row.body)
			if r.status != want {
				t.Errorf("%s %s as %s: %d; want %d (%s)", row.method, path, who, r.status, want, r.raw)
			}
		}
	}
	for _, r := range routePatterns(t) {
		if strings.Contains(r, " /v1/") && !covered[r] {
			t.Errorf("route %s has no row in the authorization matrix", r)
		}
	}
}
