package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
)

func TestBlocksAndMutesThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false)
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")
	alicePost := f.do("POST", "/v1/posts", alice, `{"text":"by alice #t"}`).body["id"].(string)
	bobPost := f.do("POST", "/v1/posts", bob, `{"text":"by bob #t"}`).body["id"].(string)
	eventuallyHTTP(t, "follow counts", func() error {
		if c := f.do("GET", "/v1/users/alice", alice, "").body["follower_count"]; c != float64(1) {
			return fmt.Errorf("alice follower_count %v", c)
		}
		return nil
	})

	// Bob mentions and likes before the block: whoever keeps who blocks bob in memory (the
	// embedded store's only writer) learns of the block when it is made, and of its lifting.
	if r := f.do("POST", "/v1/posts", bob, `{"text":"before @alice and @carol"}`); r.status != 201 {
		t.Fatalf("a mention before the block: %d %s", r.status, r.raw)
	}
	f.want(f.do("PUT", "/v1/posts/"+alicePost+"/likes/bob", bob, ""), 200, "")
	f.want(f.do("DELETE", "/v1/posts/"+alicePost+"/likes/bob", bob, ""), 204, "")

	f.want(f.do("PUT", "/v1/users/alice/blocks/alice", alice, ""), 400, "invalid")
	f.want(f.do("PUT", "/v1/users/alice/blocks/nobody", alice, ""), 404, "not_found")
	f.want(f.do("PUT", "/v1/users/alice/blocks/bob", bob, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/users/alice/blocks/bob", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/alice/blocks/bob", alice, ""), 204, "") // again: no change

	// The follows ended both ways, and the counts followed.
	f.want(f.do("GET", "/v1/users/alice/following/bob", carol, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/users/bob/following/alice", carol, ""), 404, "not_found")
	eventuallyHTTP(t, "counts after the block", func() error {
		a := f.do("GET", "/v1/users/alice", carol, "").body
		b := f.do("GET", "/v1/users/bob", carol, "").body
		if a["follower_count"] != float64(0) || a["following_count"] != float64(0) || b["follower_count"] != float64(0) || b["following_count"] != float64(0) {
			return fmt.Errorf("alice %v/%v, bob %v/%v", a["follower_count"], a["following_count"], b["follower_count"], b["following_count"])
		}
		return nil
	})
	// Neither sees the other's posts, anywhere; a third user sees both.
	for _, c := range []struct{ tok, path, want string }{
		{bob, "/v1/users/alice/posts", ""}, {alice, "/v1/users/bob/posts", ""},
		{bob, "/v1/tags/t/posts", bobPost}, {alice, "/v1/tags/t/posts", alicePost},
		{carol, "/v1/tags/t/posts", bobPost + "," + alicePost},
	} {
		if got := postIDs(f.do("GET", c.path, c.tok, "").body["items"]); got != c.want {
			t.Errorf("GET %s = %s; want %s", c.path, got, c.want)
		}
	}
	f.want(f.do("GET", "/v1/posts/"+alicePost, bob, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/posts/"+bobPost, alice, ""), 404, "not_found")
	// The blocked user cannot follow, like, comment on or mention the blocker.
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/posts/"+alicePost+"/likes/bob", bob, ""), 403, "forbidden")
	f.want(f.do("POST", "/v1/posts/"+alicePost+"/comments", bob, `{"text":"hey"}`), 403, "forbidden")
	f.want(f.do("POST", "/v1/posts", bob, `{"text":"hello @alice"}`), 403, "forbidden")
	if r := f.do("POST", "/v1/posts", carol, `{"text":"hello @alice"}`); r.status != 201 {
		t.Fatalf("a third user's mention: %d %s", r.status, r.raw)
	}
	// The blocker's @bob mentions nobody, so bob is not told of a post he cannot read; in an edit
	// of a post from before the block neither, and after the unblock an edit mentions him anew.
	r := f.do("POST", "/v1/posts", alice, `{"text":"blocked @bob and @carol"}`)
	f.want(r, 201, "")
	if fmt.Sprint(r.body["mentions"]) != "[carol]" {
		t.Errorf("the blocker's post mentions %v; want [carol]", r.body["mentions"])
	}
	blockerPost := r.body["id"].(string)

	// Unblocking restores visibility (the ended follows stay ended).
	f.want(f.do("DELETE", "/v1/users/alice/blocks/bob", alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/alice/blocks/bob", alice, ""), 204, "")
	f.want(f.do("GET", "/v1/posts/"+alicePost, bob, ""), 200, "")
	f.want(f.do("GET", "/v1/users/bob/following/alice", carol, ""), 404, "not_found")
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")
	if r := f.do("POST", "/v1/posts", bob, `{"text":"after @alice"}`); r.status != 201 {
		t.Fatalf("a mention after the unblock: %d %s", r.status, r.raw)
	}
	f.want(f.do("PUT", "/v1/posts/"+alicePost+"/likes/bob", bob, ""), 200, "")
	r = f.do("PATCH", "/v1/posts/"+blockerPost, alice, `{"text":"unblocked @bob and @carol"}`)
	if f.want(r, 200, ""); fmt.Sprint(r.body["mentions"]) != "[bob carol]" {
		t.Errorf("the edit after the unblock mentions %v; want [bob carol]", r.body["mentions"])
	}
	edited := r.body["edited_at"]
	eventuallyHTTP(t, "bob's mentions by alice", func() error {
		var told []string
		for _, n := range f.do("GET", "/v1/notifications", bob, "").body["items"].([]any) {
			if n := n.(map[string]any); n["type"] == "mention" && n["actor"].(map[string]any)["id"] == "alice" {
				told = append(told, fmt.Sprint(n["post_id"], " at ", n["created_at"]))
			}
		}
		if want := fmt.Sprint(blockerPost, " at ", edited); fmt.Sprint(told) != "["+want+"]" {
			return fmt.Errorf("bob was told of alice's mentions %v; want only the edit's, %s", told, want)
		}
		return nil
	})

	// Mutes: idempotent, for oneself only; their effect is on the home feed.
	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", bob, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/users/alice/mutes/nobody", alice, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
}

// TestBlocksHideLikesAndComments: as a block hides each side's posts from the other, it hides their
// likes and comments, on anyone's post, from each other's lists; others, and the app's server
// token, still see them; an unblock shows them again.
func TestBlocksHideLikesAndComments(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "alice", "bob", "carol", "dave")
	posts := map[string]string{}
	for _, u := range []string{"alice", "dave"} {
		posts[u] = f.do("POST", "/v1/posts", toks[u], `{"text":"by `+u+`"}`).body["id"].(string)
	}
	for _, r := range []struct{ who, on string }{{"bob", "alice"}, {"carol", "alice"}, {"alice", "dave"}, {"bob", "dave"}, {"carol", "dave"}} {
		f.want(f.do("PUT", "/v1/posts/"+posts[r.on]+"/likes/"+r.who, toks[r.who], ""), 200, "")
		f.want(f.do("POST", "/v1/posts/"+posts[r.on]+"/comments", toks[r.who], `{"text":"from `+r.who+`"}`), 201, "")
	}
	users := func(tok, path, attr string) string {
		r := f.do("GET", path, tok, "")
		f.want(r, 200, "")
		var out []string
		for _, it := range r.body["items"].([]any) {
			v := it.(map[string]any)[attr]
			if m, ok := v.(map[string]any); ok {
				v = m["id"]
			}
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	// check: who sees, on whose post, the likes and the comments of whom.
	check := func(when string, want map[[2]string]string) {
		t.Helper()
		for k, w := range want {
			who, on := k[0], k[1]
			if got := users(toks[who], "/v1/posts/"+posts[on]+"/likes", "user_id"); got != w {
				t.Errorf("%s: %s sees the likes of %s's post by %s; want %s", when, who, on, got, w)
			}
			if got := users(toks[who], "/v1/posts/"+posts[on]+"/comments", "author"); got != w {
				t.Errorf("%s: %s sees the comments on %s's post by %s; want %s", when, who, on, got, w)
			}
		}
	}
	f.want(f.do("PUT", "/v1/users/alice/blocks/bob", toks["alice"], ""), 204, "")
	check("blocked", map[[2]string]string{
		{"alice", "alice"}: "carol", {"alice", "dave"}: "alice,carol", {"bob", "dave"}: "bob,carol",
		{"carol", "alice"}: "bob,carol", {"carol", "dave"}: "alice,bob,carol", {"server", "alice"}: "bob,carol", {"server", "dave"}: "alice,bob,carol",
	})
	f.want(f.do("GET", "/v1/posts/"+posts["alice"]+"/likes", toks["bob"], ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/users/alice/blocks/bob", toks["alice"], ""), 204, "")
	check("unblocked", map[[2]string]string{
		{"alice", "alice"}: "bob,carol", {"alice", "dave"}: "alice,bob,carol", {"bob", "alice"}: "bob,carol", {"bob", "dave"}: "alice,bob,carol",
	})
}

// users creates users (username: the id) and returns their tokens by id, and the app's server
// token as "server".
func (f *fixture) users(t *testing.T, ids ...string) map[string]string {
	t.Helper()
	toks := map[string]string{"server": token(t, "app", true)}
	for _, u := range ids {
		f.want(f.do("PUT", "/v1/users/"+u, toks["server"], `{"username":"`+u+`"}`), 201, "")
		toks[u] = token(t, u, false)
	}
	return toks
}

// TestBlockAndMuteLists: a user reads whom they blocked and muted, a page at a time in user id
// order, and asks about one user; nobody else may (a server token may). An unblock, an unmute and
// an account deletion take the entry out, from the deletion's reply on (the erasure is held back
// here, so the lists must leave out what it has not erased yet).
func TestBlockAndMuteLists(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	f, _ := newFixtureWith(t, fixtureConfig{holdErasure: hold})
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob := token(t, "alice", false), token(t, "bob", false)
	for _, u := range []string{"erin", "carol", "dave", "bob"} {
		f.want(f.do("PUT", "/v1/users/alice/blocks/"+u, alice, ""), 204, "")
	}
	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/bob/blocks/carol", bob, ""), 204, "")

	// list reads every page of path as tok, limit 2 a page, and returns "user at time" entries.
	list := func(path, attr, tok string) []string {
		var got []string
		cursor := ""
		for range 10 {
			r := f.do("GET", path+"?limit=2"+cursor, tok, "")
			f.want(r, 200, "")
			for _, it := range r.body["items"].([]any) {
				it := it.(map[string]any)
				if _, err := time.Parse(rookery.TimeLayout, fmt.Sprint(it[attr])); err != nil {
					t.Fatalf("%s: %v", path, it)
				}
				got = append(got, fmt.Sprint(it["user_id"]))
			}
			next, _ := r.body["next_cursor"].(string)
			if next == "" {
				return got
			}
			cursor = "&cursor=" + next
		}
		t.Fatalf("%s: more than 10 pages", path)
		return nil
	}
	if got := list("/v1/users/alice/blocks", "blocked_at", alice); !slices.Equal(got, []string{"bob", "carol", "dave", "erin"}) {
		t.Fatalf("alice's blocks = %v", got)
	}
	if got := list("/v1/users/alice/blocks", "blocked_at", server); len(got) != 4 {
		t.Fatalf("alice's blocks, read by the server = %v", got)
	}
	if got := list("/v1/users/alice/mutes", "muted_at", alice); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("alice's mutes = %v", got)
	}
	if got := list("/v1/users/bob/mutes", "muted_at", bob); len(got) != 0 {
		t.Fatalf("bob's mutes = %v", got)
	}
	// One user: 200 with the time, or 404.
	if r := f.do("GET", "/v1/users/alice/blocks/dave", alice, ""); r.status != 200 || r.body["blocked_at"] == nil {
		t.Fatalf("alice's block of dave: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/v1/users/alice/mutes/carol", alice, ""); r.status != 200 || r.body["muted_at"] == nil {
		t.Fatalf("alice's mute of carol: %d %s", r.status, r.raw)
	}
	f.want(f.do("GET", "/v1/users/alice/mutes/dave", alice, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/users/bob/blocks/alice", bob, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/users/alice/blocks/alice", alice, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/users/alice/blocks/no%23body", alice, ""), 400, "invalid")
	// Nobody else may read them, the blocked user least of all.
	f.want(f.do("GET", "/v1/users/alice/blocks", bob, ""), 403, "forbidden")
	f.want(f.do("GET", "/v1/users/alice/blocks/bob", bob, ""), 403, "forbidden")
	f.want(f.do("GET", "/v1/users/alice/mutes", bob, ""), 403, "forbidden")
	// A cursor of alice's list is no cursor of bob's.
	next := f.do("GET", "/v1/users/alice/blocks?limit=1", alice, "").body["next_cursor"].(string)
	f.want(f.do("GET", "/v1/users/bob/blocks?cursor="+next, bob, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/users/alice/blocks?limit=0", alice, ""), 400, "invalid")

	// An unblock, an unmute and a deleted account leave the lists.
	f.want(f.do("DELETE", "/v1/users/alice/blocks/carol", alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/dave", server, ""), 204, "")
	if got := list("/v1/users/alice/blocks", "blocked_at", alice); !slices.Equal(got, []string{"bob", "erin"}) {
		t.Fatalf("alice's blocks after an unblock and dave's deletion = %v", got)
	}
	if got := list("/v1/users/alice/mutes", "muted_at", alice); len(got) != 0 {
		t.Fatalf("alice's mutes after the unmute = %v", got)
	}
	f.want(f.do("GET", "/v1/users/alice/blocks/dave", alice, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/users/alice/blocks/carol", alice, ""), 404, "not_found")
	// A deleted user's own lists are gone with them.
	f.want(f.do("DELETE", "/v1/users/alice", server, ""), 204, "")
	f.want(f.do("GET", "/v1/users/alice/blocks", server, ""), 404, "not_found")
}
