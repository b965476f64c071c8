package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFollowGraphThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob := token(t, "alice", false), token(t, "bob", false)

	r := f.do("PUT", "/v1/users/alice/following/bob", alice, "")
	f.want(r, 200, "")
	first := r.body["followed_at"]
	if r.body["following"] != true || first == nil {
		t.Fatalf("follow = %s", r.raw)
	}
	// Following again changes nothing: same time, and the counts move once (below).
	time.Sleep(5 * time.Millisecond)
	if r := f.do("PUT", "/v1/users/alice/following/bob", alice, ""); r.body["followed_at"] != first {
		t.Fatalf("repeat follow = %s; want followed_at %v", r.raw, first)
	}
	f.want(f.do("PUT", "/v1/users/alice/following/carol", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/alice/following/dave", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/carol/following/bob", server, ""), 200, "")

	f.want(f.do("PUT", "/v1/users/alice/following/alice", alice, ""), 400, "invalid")
	f.want(f.do("PUT", "/v1/users/alice/following/nobody", alice, ""), 404, "not_found")
	f.want(f.do("PUT", "/v1/users/bob/following/alice", alice, ""), 403, "forbidden")
	f.want(f.do("DELETE", "/v1/users/bob/following/alice", alice, ""), 403, "forbidden")
	f.want(f.do("PUT", "/v1/users/alice/following/bo%23b", alice, ""), 400, "invalid")

	if r := f.do("GET", "/v1/users/alice/following/bob", bob, ""); r.status != 200 || r.body["followed_at"] != first {
		t.Fatalf("follow status = %d %s", r.status, r.raw)
	}
	f.want(f.do("GET", "/v1/users/bob/following/alice", bob, ""), 404, "not_found")

	// Lists are newest first and page with cursors.
	eventuallyHTTP(t, "following list", func() error {
		r := f.do("GET", "/v1/users/alice/following?limit=2", bob, "")
		if got := ids(r.body["items"]); got != "dave,carol" || r.body["next_cursor"] == nil {
			return fmt.Errorf("page 1 = %s", r.raw)
		}
		r = f.do("GET", "/v1/users/alice/following?limit=2&cursor="+r.body["next_cursor"].(string), bob, "")
		if got := ids(r.body["items"]); got != "bob" || r.body["next_cursor"] != nil {
			return fmt.Errorf("page 2 = %s", r.raw)
		}
		if got := ids(f.do("GET", "/v1/users/bob/followers", alice, "").body["items"]); got != "carol,alice" {
			return fmt.Errorf("followers of bob = %s", got)
		}
		return nil
	})
	f.want(f.do("GET", "/v1/users/alice/following?cursor=forged", bob, ""), 400, "invalid")
	r = f.do("GET", "/v1/users/alice/following?limit=2", bob, "")
	f.want(f.do("GET", "/v1/users/bob/following?limit=2&cursor="+r.body["next_cursor"].(string), bob, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/users/alice/following?limit=0", bob, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/users/alice/following?limit=101", bob, ""), 400, "invalid")

	// Counts are kept by the counters consumer.
	eventuallyHTTP(t, "counts", func() error {
		a := f.do("GET", "/v1/users/alice", bob, "").body
		b := f.do("GET", "/v1/users/bob", bob, "").body
		if a["following_count"] != float64(3) || b["follower_count"] != float64(2) {
			return fmt.Errorf("alice following %v, bob followers %v", a["following_count"], b["follower_count"])
		}
		return nil
	})
	// Unfollow is idempotent too.
	f.want(f.do("DELETE", "/v1/users/alice/following/bob", alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/alice/following/bob", alice, ""), 204, "")
	f.want(f.do("GET", "/v1/users/alice/following/bob", bob, ""), 404, "not_found")
	eventuallyHTTP(t, "counts after unfollow", func() error {
		a := f.do("GET", "/v1/users/alice", bob, "").body
		b := f.do("GET", "/v1/users/bob", bob, "").body
		if a["following_count"] != float64(2) || b["follower_count"] != float64(1) {
			return fmt.Errorf("alice following %v, bob followers %v", a["following_count"], b["follower_count"])
		}
		return nil
	})
}

func ids(items any) string {
	var out []string
	for _, it := range items.([]any) {
		out = append(out, it.(map[string]any)["user_id"].(string))
	}
	return strings.Join(out, ",")
}

func eventuallyHTTP(t *testing.T, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, check)
}

// eventuallyWithin is eventuallyHTTP with a deadline of its own, for work with a longer bound.
func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
