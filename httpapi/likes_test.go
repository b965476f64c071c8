package httpapi_test

import (
	"context"
	"fmt"
	"testing"
)

func TestLikesThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false)
	pub := f.do("POST", "/v1/posts", alice, `{"text":"like me"}`).body["id"].(string)
	priv := f.do("POST", "/v1/posts", alice, `{"text":"followers only","visibility":"followers"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")

	// A like is idempotent: the repeat succeeds and the count moves once.
	for range 2 {
		if r := f.do("PUT", "/v1/posts/"+pub+"/likes/bob", bob, ""); r.status != 200 || r.body["liked"] != true {
			t.Fatalf("like = %d %s", r.status, r.raw)
		}
	}
	f.want(f.do("PUT", "/v1/posts/"+pub+"/likes/carol", carol, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+pub+"/likes/carol", bob, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/posts/"+pub+"/likes/dave", server, ""), 404, "not_found") // no such user
	// A followers post can be liked by a follower, not by a stranger (it is invisible to them).
	f.want(f.do("PUT", "/v1/posts/"+priv+"/likes/bob", bob, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+priv+"/likes/carol", carol, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/posts/"+priv+"/likes", carol, ""), 404, "not_found")
	f.want(f.do("PUT", "/v1/posts/01JD0000000000000000000099/likes/bob", bob, ""), 404, "not_found")

	if r := f.do("GET", "/v1/posts/"+pub, bob, ""); r.body["liked_by_me"] != true {
		t.Fatalf("bob's view = %s", r.raw)
	}
	if r := f.do("GET", "/v1/posts/"+pub, alice, ""); r.body["liked_by_me"] != false {
		t.Fatalf("alice's view = %s", r.raw)
	}
	if got := f.do("GET", "/v1/users/alice/posts", bob, "").body["items"].([]any); got[0].(map[string]any)["liked_by_me"] != true || got[1].(map[string]any)["liked_by_me"] != true {
		t.Fatalf("bob's list view = %v", got)
	}
	eventuallyHTTP(t, "likes list and count", func() error {
		r := f.do("GET", "/v1/posts/"+pub+"/likes", alice, "")
		if got := ids(r.body["items"]); got != "carol,bob" {
			return fmt.Errorf("likes newest first = %s", got)
		}
		if c := f.do("GET", "/v1/posts/"+pub, alice, "").body["like_count"]; c != float64(2) {
			return fmt.Errorf("like_count = %v", c)
		}
		return nil
	})
	// Unlike is idempotent too.
	f.want(f.do("DELETE", "/v1/posts/"+pub+"/likes/bob", bob, ""), 204, "")
	f.want(f.do("DELETE", "/v1/posts/"+pub+"/likes/bob", bob, ""), 204, "")
	if r := f.do("GET", "/v1/posts/"+pub, bob, ""); r.body["liked_by_me"] != false {
		t.Fatalf("after unlike = %s", r.raw)
	}
	eventuallyHTTP(t, "like_count after unlike", func() error {
		if c := f.do("GET", "/v1/posts/"+pub, alice, "").body["like_count"]; c != float64(1) {
			return fmt.Errorf("like_count = %v", c)
		}
		return nil
	})
	// Likes of a deleted post: the counts consumer skips the gone post instead of failing.
	f.want(f.do("PUT", "/v1/posts/"+priv+"/likes/alice", alice, ""), 200, "")
	f.want(f.do("DELETE", "/v1/posts/"+priv, alice, ""), 204, "")
	// Once the counters consumer has handled everything, nothing is in its dead-letter queue.
	eventuallyHTTP(t, "the counters consumer caught up", func() error {
		if n, _, err := f.evlog.Lag(context.Background(), "counters"); err != nil || n != 0 {
			return fmt.Errorf("lag %d, %v", n, err)
		}
		return nil
	})
	if r := f.do("GET", "/v1/admin/dlq/counters", server, ""); len(r.body["items"].([]any)) != 0 {
		t.Fatalf("dead letters: %s", r.raw)
	}
}

// TestUnlikeAPostNoLongerSeen: a like is its liker's to take back, also from a post they can no
// longer see (they stopped following the author of a followers-only post, or the author blocked
// them); the count and the likes list follow. Without a like of theirs such a post stays unseen
// (404 or 403, as any write about it), and so does a deleted post.
func TestUnlikeAPostNoLongerSeen(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "alice", "bob", "carol")
	alice, bob, carol := toks["alice"], toks["bob"], toks["carol"]
	priv := f.do("POST", "/v1/posts", alice, `{"text":"followers only","visibility":"followers"}`).body["id"].(string)
	pub := f.do("POST", "/v1/posts", alice, `{"text":"public"}`).body["id"].(string)
	gone := f.do("POST", "/v1/posts", alice, `{"text":"deleted soon"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+priv+"/likes/bob", bob, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+pub+"/likes/carol", carol, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+gone+"/likes/carol", carol, ""), 200, "")
	f.want(f.do("DELETE", "/v1/posts/"+gone, alice, ""), 204, "")

	f.want(f.do("DELETE", "/v1/users/bob/following/alice", bob, ""), 204, "")
	f.want(f.do("GET", "/v1/posts/"+priv, bob, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/posts/"+priv+"/likes/bob", bob, ""), 204, "")
	f.want(f.do("DELETE", "/v1/posts/"+priv+"/likes/bob", bob, ""), 404, "not_found") // taken back: unseen again
	f.want(f.do("DELETE", "/v1/posts/"+priv+"/likes/carol", carol, ""), 404, "not_found")

	f.want(f.do("PUT", "/v1/users/alice/blocks/carol", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/posts/"+pub+"/likes/carol", carol, ""), 403, "forbidden")
	f.want(f.do("DELETE", "/v1/posts/"+pub+"/likes/carol", bob, ""), 403, "forbidden") // only as oneself
	f.want(f.do("DELETE", "/v1/posts/"+pub+"/likes/carol", carol, ""), 204, "")
	f.want(f.do("DELETE", "/v1/posts/"+gone+"/likes/carol", carol, ""), 404, "not_found")

	eventuallyHTTP(t, "the likes taken back", func() error {
		for _, id := range []string{priv, pub} {
			p := f.do("GET", "/v1/posts/"+id, alice, "").body
			l := f.do("GET", "/v1/posts/"+id+"/likes", alice, "").body
			if p["like_count"] != float64(0) || len(l["items"].([]any)) != 0 {
				return fmt.Errorf("post %s: like_count %v, likes %v", id, p["like_count"], l["items"])
			}
		}
		return nil
	})
}
