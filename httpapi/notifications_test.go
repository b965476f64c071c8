package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

func notifTypes(items any) string {
	var out []string
	for _, it := range items.([]any) {
		n := it.(map[string]any)
		out = append(out, n["type"].(string)+":"+n["actor"].(map[string]any)["id"].(string))
	}
	return strings.Join(out, ",")
}

func TestNotificationsThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol, dave := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false), token(t, "dave", false)
	f.want(f.do("PUT", "/v1/users/alice/blocks/dave", alice, ""), 204, "")

	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")                  // follow
	post := f.do("POST", "/v1/posts", alice, `{"text":"hello @carol"}`).body["id"].(string) // carol: mention
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/bob", bob, ""), 200, "")                   // like
	f.want(f.do("POST", "/v1/posts/"+post+"/comments", carol, `{"text":"hi!"}`), 201, "")   // comment
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/alice", alice, ""), 200, "")               // own: nothing
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/carol", carol, ""), 200, "")               // like, then undone
	f.want(f.do("DELETE", "/v1/posts/"+post+"/likes/carol", carol, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/dave/following/carol", dave, ""), 200, "") // carol: follow by dave

	eventuallyHTTP(t, "alice's notifications", func() error {
		r := f.do("GET", "/v1/notifications", alice, "")
		if got := notifTypes(r.body["items"]); got != "comment:carol,like:bob,follow:bob" {
			return fmt.Errorf("alice has %s", got)
		}
		return nil
	})
	eventuallyHTTP(t, "carol's notifications", func() error {
		if got := notifTypes(f.do("GET", "/v1/notifications", carol, "").body["items"]); got != "follow:dave,mention:alice" {
			return fmt.Errorf("carol has %s", got)
		}
		return nil
	})
	r := f.do("GET", "/v1/notifications", alice, "")
	items := r.body["items"].([]any)
	comment := items[0].(map[string]any)
	if comment["post_id"] != post || comment["comment_id"] == nil || comment["read"] != false {
		t.Fatalf("comment notification = %v", comment)
	}
	if items[2].(map[string]any)["post_id"] != nil {
		t.Fatalf("a follow notification has a post: %v", items[2])
	}
	if c := f.do("GET", "/v1/notifications/unread_count", alice, "").body["count"]; c != float64(3) {
		t.Fatalf("unread count = %v", c)
	}
	// Mark one read, then all.
	f.want(f.do("POST", "/v1/notifications/read", alice, `{"ids":["`+comment["id"].(string)+`"]}`), 204, "")
	if got := notifTypes(f.do("GET", "/v1/notifications?unread=true", alice, "").body["items"]); got != "like:bob,follow:bob" {
		t.Fatalf("unread after marking one = %s", got)
	}
	f.want(f.do("POST", "/v1/notifications/read", alice, `{"all":true}`), 204, "")
	if c := f.do("GET", "/v1/notifications/unread_count", alice, "").body["count"]; c != float64(0) {
		t.Fatalf("unread count after all = %v", c)
	}
	if r := f.do("GET", "/v1/notifications", alice, ""); !strings.Contains(r.raw, `"read":true`) || strings.Contains(r.raw, `"read":false`) {
		t.Fatalf("after marking all read: %s", r.raw)
	}
	// A like undone after it was read leaves its (read) notification.
	f.want(f.do("DELETE", "/v1/posts/"+post+"/likes/bob", bob, ""), 204, "")
	f.want(f.do("POST", "/v1/notifications/read", alice, `{}`), 400, "invalid")
	f.want(f.do("POST", "/v1/notifications/read", alice, `{"ids":["a#b"]}`), 400, "invalid")
	f.want(f.do("GET", "/v1/notifications?unread=maybe", alice, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/notifications", server, ""), 400, "invalid") // a server token must name a user
	if got := notifTypes(f.do("GET", "/v1/notifications", server, "", "X-On-Behalf-Of", "carol").body["items"]); got != "follow:dave,mention:alice" {
		t.Fatalf("server on behalf of carol sees %s", got)
	}
	// An edit that adds a mention notifies the newly mentioned user only.
	f.want(f.do("PATCH", "/v1/posts/"+post, alice, `{"text":"hello @carol and @bob"}`), 200, "")
	eventuallyHTTP(t, "mention by edit", func() error {
		if got := notifTypes(f.do("GET", "/v1/notifications", bob, "").body["items"]); got != "mention:alice" {
			return fmt.Errorf("bob has %s", got)
		}
		if got := notifTypes(f.do("GET", "/v1/notifications", carol, "").body["items"]); got != "follow:dave,mention:alice" {
			return fmt.Errorf("carol has %s", got)
		}
		return nil
	})
	eventuallyHTTP(t, "the read like notification stays", func() error {
		if got := notifTypes(f.do("GET", "/v1/notifications", alice, "").body["items"]); got != "comment:carol,like:bob,follow:bob" {
			return fmt.Errorf("alice has %s", got)
		}
		return nil
	})
}

// TestMentionsInFollowersPosts: a followers post tells only the users it mentions who can read it,
// its author's followers (as they are when it is written or edited); its mentions still list all.
func TestMentionsInFollowersPosts(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "kate", "leo", "mia", "nora")
	f.want(f.do("PUT", "/v1/users/mia/following/kate", toks["mia"], ""), 200, "")
	r := f.do("POST", "/v1/posts", toks["kate"], `{"text":"for followers @leo @mia","visibility":"followers"}`)
	f.want(r, 201, "")
	id := r.body["id"].(string)
	if fmt.Sprint(r.body["mentions"]) != "[leo mia]" {
		t.Fatalf("mentions = %v", r.body["mentions"])
	}
	f.want(f.do("PUT", "/v1/users/nora/following/kate", toks["nora"], ""), 200, "")
	f.want(f.do("PATCH", "/v1/posts/"+id, toks["kate"], `{"text":"for followers @leo @mia @nora"}`), 200, "")
	// A public post tells everyone it names, leo too: his notifications are read after it.
	f.want(f.do("POST", "/v1/posts", toks["kate"], `{"text":"for all @leo"}`), 201, "")
	eventuallyHTTP(t, "mentions told", func() error {
		for u, want := range map[string]int{"leo": 1, "mia": 1, "nora": 1} {
			n := 0
			for _, it := range f.do("GET", "/v1/notifications", toks[u], "").body["items"].([]any) {
				if it := it.(map[string]any); it["type"] == "mention" {
					if u == "leo" && it["post_id"] == id {
						return fmt.Errorf("leo, no follower, was told of the followers post")
					}
					n++
				}
			}
			if n != want {
				return fmt.Errorf("%s has %d mention notifications; want %d", u, n, want)
			}
		}
		return nil
	})
}

// TestMentionsToldWhenMadePublic: a followers post that is made public tells the users it named
// but could not tell (non-followers when it was written, or edited to name them), once; an edit that
// keeps it for followers tells them nothing, though they follow its author since.
func TestMentionsToldWhenMadePublic(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "pia", "quin", "rae", "sol", "tess", "uma")
	for _, u := range []string{"rae", "tess", "uma"} {
		f.want(f.do("PUT", "/v1/users/"+u+"/following/pia", toks[u], ""), 200, "")
	}
	id := f.do("POST", "/v1/posts", toks["pia"], `{"text":"for followers @quin @rae","visibility":"followers"}`).body["id"].(string)
	edit := func(body string) { f.want(f.do("PATCH", "/v1/posts/"+id, toks["pia"], body), 200, "") }
	edit(`{"text":"for followers @quin @rae @sol"}`)
	f.want(f.do("PUT", "/v1/users/sol/following/pia", toks["sol"], ""), 200, "")
	edit(`{"text":"for followers @quin @rae @sol @tess"}`)
	// mentions returns how many mention notifications of the post each user has, once the last
	// user has one: one post's events are handled in order, so the edits before are handled too.
	mentions := func(users ...string) map[string]int {
		var n map[string]int
		eventuallyHTTP(t, users[len(users)-1]+" told", func() error {
			n = map[string]int{}
			for _, u := range users {
				for _, it := range f.do("GET", "/v1/notifications", toks[u], "").body["items"].([]any) {
					if it := it.(map[string]any); it["type"] == "mention" && it["post_id"] == id {
						n[u]++
					}
				}
			}
			if n[users[len(users)-1]] == 0 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		return n
	}
	if n := mentions("quin", "rae", "sol", "tess"); fmt.Sprint(n) != "map[rae:1 tess:1]" {
		t.Fatalf("told of the followers post: %v; want rae and tess, once", n)
	}
	edit(`{"visibility":"public"}`)
	edit(`{"visibility":"followers"}`)
	edit(`{"visibility":"public","text":"for all @quin @rae @sol @tess @uma"}`)
	if n := mentions("quin", "rae", "sol", "tess", "uma"); fmt.Sprint(n) != "map[quin:1 rae:1 sol:1 tess:1 uma:1]" {
		t.Fatalf("told of the post made public: %v; want everyone once", n)
	}
}

// TestUndoneFollowsLeaveNoNotification: a follow undone before its notification is read (by an
// unfollow, or by the block that ends it) takes the notification with it, as an unlike does; one
// read before stays.
func TestUndoneFollowsLeaveNoNotification(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "xena", "yuri", "zoe", "walt")
	for range 3 {
		f.want(f.do("PUT", "/v1/users/yuri/following/xena", toks["yuri"], ""), 200, "")
		f.want(f.do("DELETE", "/v1/users/yuri/following/xena", toks["yuri"], ""), 204, "")
	}
	f.want(f.do("PUT", "/v1/users/zoe/following/xena", toks["zoe"], ""), 200, "")
	f.want(f.do("PUT", "/v1/users/xena/blocks/zoe", toks["xena"], ""), 204, "")
	// walt's follow is read, then undone: its notification stays, read.
	f.want(f.do("PUT", "/v1/users/walt/following/xena", toks["walt"], ""), 200, "")
	eventuallyHTTP(t, "walt's follow told", func() error {
		if got := notifTypes(f.do("GET", "/v1/notifications", toks["xena"], "").body["items"]); !strings.Contains(got, "follow:walt") {
			return fmt.Errorf("xena's notifications: %s", got)
		}
		return nil
	})
	f.want(f.do("POST", "/v1/notifications/read", toks["xena"], `{"all":true}`), 204, "")
	f.want(f.do("DELETE", "/v1/users/walt/following/xena", toks["walt"], ""), 204, "")
	// A like after all of them: once it is told, the follows' events were handled before it.
	post := f.do("POST", "/v1/posts", toks["xena"], `{"text":"last"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/yuri", toks["yuri"], ""), 200, "")
	eventuallyHTTP(t, "only walt's follow and yuri's like left", func() error {
		r := f.do("GET", "/v1/notifications", toks["xena"], "")
		if got := notifTypes(r.body["items"]); got != "like:yuri,follow:walt" {
			return fmt.Errorf("xena's notifications: %s", got)
		}
		if c := f.do("GET", "/v1/notifications/unread_count", toks["xena"], "").body["count"]; c != float64(1) {
			return fmt.Errorf("unread count %v; want 1", c)
		}
		return nil
	})
}
