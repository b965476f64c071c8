package httpapi_test

import (
	"strings"
	"testing"
)

// TestAuthorizationMatrix walks every route that acts on someone's data with every kind of caller:
// the owner, another user, a follower of the owner, a user the owner blocked, the server, and no
// token. Each cell says the status the caller gets; a route added without a row here is a gap.
func TestAuthorizationMatrix(t *testing.T) {
	f, _ := newFixture(t)
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
	pub := f.do("POST", "/v1/posts", tok["owner"], `{"text":"public"}`).body["id"].(string)
	priv := f.do("POST", "/v1/posts", tok["owner"], `{"text":"followers only","visibility":"followers"}`).body["id"].(string)

	type cell = map[string]int // caller -> status; "none" is no token
	rows := []struct {
		method, path, body string
		want               cell
	}{
		// The owner's own data: only the owner (or the server) may change it.
		{"PUT", "/v1/users/owner", `{"username":"owner"}`, cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"PUT", "/v1/users/owner/following/other", "", cell{"owner": 200, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		{"DELETE", "/v1/users/owner/following/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"PUT", "/v1/users/owner/mutes/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"PUT", "/v1/users/owner/blocks/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		{"DELETE", "/v1/users/owner/blocks/other", "", cell{"owner": 204, "other": 403, "follower": 403, "blocked": 403, "server": 204, "none": 401}},
		// Following the owner: the blocked user may not.
		{"PUT", "/v1/users/{caller}/following/owner", "", cell{"follower": 200, "blocked": 403, "none": 401}},
		// Reading profiles and the graph: any authenticated caller.
		{"GET", "/v1/users/owner", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 200, "server": 200, "none": 401}},
		{"GET", "/v1/users/owner/followers", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 200, "server": 200, "none": 401}},
		// A public post: hidden from the blocked user; liking and commenting forbidden to them.
		{"GET", "/v1/posts/" + pub, "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"PUT", "/v1/posts/" + pub + "/likes/{caller}", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 403, "none": 401}},
		{"POST", "/v1/posts/" + pub + "/comments", `{"text":"hi"}`, cell{"owner": 201, "other": 201, "follower": 201, "blocked": 403, "none": 401}},
		{"GET", "/v1/posts/" + pub + "/comments", "", cell{"owner": 200, "other": 200, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"PATCH", "/v1/posts/" + pub, `{"text":"edited"}`, cell{"owner": 200, "other": 403, "follower": 403, "blocked": 404, "none": 401}},
		// A followers post: the owner, followers and the server only, on every route.
		{"GET", "/v1/posts/" + priv, "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"GET", "/v1/posts/" + priv + "/likes", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"GET", "/v1/posts/" + priv + "/comments", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 404, "server": 200, "none": 401}},
		{"PUT", "/v1/posts/" + priv + "/likes/{caller}", "", cell{"owner": 200, "other": 404, "follower": 200, "blocked": 403, "none": 401}},
		{"POST", "/v1/posts/" + priv + "/comments", `{"text":"hi"}`, cell{"owner": 201, "other": 404, "follower": 201, "blocked": 403, "none": 401}},
		// Someone else's likes: nobody may like as another user.
		{"PUT", "/v1/posts/" + pub + "/likes/owner", "", cell{"other": 403, "follower": 403, "blocked": 403, "none": 401}},
		// Administration: server tokens only.
		{"GET", "/v1/admin/dlq/counters", "", cell{"owner": 403, "other": 403, "follower": 403, "blocked": 403, "server": 200, "none": 401}},
		// Deleting a post: its author or the server (last, as it removes the post).
		{"DELETE", "/v1/posts/" + priv, "", cell{"other": 404, "follower": 403, "blocked": 404, "none": 401}},
		{"DELETE", "/v1/posts/" + priv, "", cell{"owner": 204}},
		{"DELETE", "/v1/posts/" + pub, "", cell{"server": 204}},
	}
	order := []string{"none", "blocked", "other", "follower", "owner", "server"}
	for _, row := range rows {
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
}
