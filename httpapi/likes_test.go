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
