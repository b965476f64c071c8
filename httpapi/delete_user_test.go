package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery/table"
)

// TestDeleteUser deletes an account that has something of every kind, and checks that from the
// reply on nothing of it shows through any route, that others' counters move once the workers
// have run, that the stored data is erased (read straight from the table), and that the username
// and id are free again after the grace period.
func TestDeleteUser(t *testing.T) {
	// The erasure waits until the checks of "from the reply on" are done: they must hold on the read
	// path alone.
	hold := make(chan struct{})
	const grace = 15 * time.Second // longer than the erasure takes (on DynamoDB it waits out the index lag), with room for a busy machine
	f, _ := newFixtureWith(t, fixtureConfig{deletedGrace: grace, holdErasure: hold})
	server := token(t, "app", true)
	for _, u := range []string{"delalice", "delbob", "delcarol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "delalice", false), token(t, "delbob", false), token(t, "delcarol", false)

	// alice's own things, and her part in bob's and carol's.
	var alicePosts []string
	for i, text := range []string{"hello #deltag", "hi @delbob", "third"} {
		vis := "public"
		if i == 2 {
			vis = "followers"
		}
		alicePosts = append(alicePosts, f.do("POST", "/v1/posts", alice, fmt.Sprintf(`{"text":%q,"visibility":%q}`, text, vis)).body["id"].(string))
	}
	bobPost := f.do("POST", "/v1/posts", bob, `{"text":"bob's #deltag"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/users/delalice/following/delbob", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/delbob/following/delalice", bob, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/delcarol/following/delalice", carol, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/delcarol/following/delbob", carol, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+bobPost+"/likes/delalice", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/posts/"+bobPost+"/likes/delcarol", carol, ""), 200, "")
	f.want(f.do("POST", "/v1/posts/"+bobPost+"/comments", alice, `{"text":"alice was here"}`), 201, "")
	f.want(f.do("POST", "/v1/posts/"+bobPost+"/comments", carol, `{"text":"carol was here"}`), 201, "")
	f.want(f.do("PUT", "/v1/posts/"+alicePosts[0]+"/likes/delbob", bob, ""), 200, "")
	f.want(f.do("POST", "/v1/posts/"+alicePosts[0]+"/comments", bob, `{"text":"bob on alice's"}`), 201, "")
	carolPost := f.do("POST", "/v1/posts", carol, `{"text":"thanks @delalice"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/users/delalice/mutes/delcarol", alice, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/delcarol/blocks/delalice", carol, ""), 204, "") // ends carol's follow of alice
	f.want(f.do("PUT", "/v1/users/delcarol/following/delbob", carol, ""), 200, "")
	f.want(f.do("POST", "/v1/activities", alice, `{"type":"daily_open","idempotency_key":"d1"}`), 201, "")
	eventuallyHTTP(t, "bob's notifications", func() error {
		// alice's follow, like, comment and mention; carol's follow, like and comment
		if n := len(f.do("GET", "/v1/notifications", bob, "").body["items"].([]any)); n != 7 {
			return fmt.Errorf("bob has %d notifications before the deletion; want 7", n)
		}
		return nil
	})
	// Where carol's post shows: read before the deletion, so that the feed's page is kept.
	mentionPaths := []string{"/v1/posts/" + carolPost, "/v1/users/delcarol/posts", "/v1/feed"}
	mentions := func(path string) string {
		t.Helper()
		r := f.do("GET", path, carol, "")
		f.want(r, 200, "")
		items, ok := r.body["items"].([]any)
		if !ok {
			items = []any{r.body}
		}
		for _, it := range items {
			if p := it.(map[string]any); p["id"] == carolPost {
				return fmt.Sprint(p["mentions"])
			}
		}
		t.Fatalf("GET %s does not show carol's post: %s", path, r.raw)
		return ""
	}
	eventuallyHTTP(t, "carol's feed", func() error {
		if r := f.do("GET", "/v1/feed", carol, ""); !strings.Contains(r.raw, carolPost) {
			return fmt.Errorf("carol's feed does not show her post yet: %s", r.raw)
		}
		return nil
	})
	for _, path := range mentionPaths {
		if got := mentions(path); got != "[delalice]" {
			t.Fatalf("GET %s: carol's post mentions %s before the deletion; want [delalice]", path, got)
		}
	}
	eventuallyHTTP(t, "bob's feed", func() error {
		if r := f.do("GET", "/v1/feed", bob, ""); !strings.Contains(r.raw, alicePosts[0]) {
			return fmt.Errorf("bob's feed does not show alice's post yet: %s", r.raw)
		}
		if r := f.do("GET", "/v1/feed", alice, ""); !strings.Contains(r.raw, bobPost) {
			return fmt.Errorf("alice's feed does not show bob's post yet: %s", r.raw)
		}
		return nil
	})

	// Only alice or a server token may delete her; an unknown user is not found.
	f.want(f.do("DELETE", "/v1/users/delalice", bob, ""), 403, "forbidden")
	f.want(f.do("DELETE", "/v1/users/nobody", server, ""), 404, "not_found")
	deleted := time.Now()
	f.want(f.do("DELETE", "/v1/users/delalice", alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/delalice", alice, ""), 204, "") // again: nothing changes

	// From the reply on, before any worker ran: nothing of alice's anywhere.
	gone := func(when string) {
		t.Helper()
		for _, path := range []string{"/v1/users/delalice", "/v1/usernames/delalice", "/v1/users/delalice/followers",
			"/v1/users/delalice/following", "/v1/users/delalice/streak", "/v1/users/delalice/export",
			"/v1/users/delalice/posts", "/v1/users/delalice/blocks", "/v1/users/delalice/mutes",
			"/v1/posts/" + alicePosts[0], "/v1/users/delbob/following/delalice", "/v1/users/delalice/following/delbob"} {
			if r := f.do("GET", path, server, ""); r.status != 404 {
				t.Fatalf("%s: GET %s = %d %s; want 404", when, path, r.status, r.raw)
			}
		}
		shows := func(path, tok string) {
			t.Helper()
			if r := f.do("GET", path, tok, ""); r.status != 200 || strings.Contains(r.raw, "delalice") || strings.Contains(r.raw, alicePosts[0]) {
				t.Fatalf("%s: GET %s = %d %s; want 200 without alice", when, path, r.status, r.raw)
			}
		}
		for _, path := range []string{"/v1/feed", "/v1/notifications", "/v1/users/delbob/followers", "/v1/posts/" + bobPost + "/likes",
			"/v1/posts/" + bobPost + "/comments", "/v1/tags/deltag/posts",
			"/v1/leaderboards/authors?period=day", "/v1/leaderboards/streaks"} {
			shows(path, bob)
		}
		shows("/v1/users/delcarol/following", carol)
		for _, path := range []string{"/v1/feed", "/v1/notifications", "/v1/notifications/unread_count"} { // her own (her feed holds her posts until the erasure)
			if r := f.do("GET", path, alice, ""); r.status != 404 {
				t.Fatalf("%s: GET %s as alice = %d %s; want 404", when, path, r.status, r.raw)
			}
		}
		// A post that named her (its text stays) mentions nobody.
		for _, path := range mentionPaths {
			if got := mentions(path); got != "[]" {
				t.Fatalf("%s: GET %s: carol's post mentions %s; want []", when, path, got)
			}
		}
	}
	gone("right after the reply")

	// A deleted user can do nothing, and nobody can follow or mention them.
	f.want(f.do("POST", "/v1/posts", alice, `{"text":"still here?"}`), 404, "not_found")
	f.want(f.do("PUT", "/v1/posts/"+bobPost+"/likes/delalice", alice, ""), 404, "not_found")
	f.want(f.do("POST", "/v1/activities", alice, `{"type":"daily_open","idempotency_key":"d2"}`), 404, "not_found")
	f.want(f.do("PUT", "/v1/users/delbob/following/delalice", bob, ""), 404, "not_found")
	f.want(f.do("PUT", "/v1/users/delbob/mutes/delalice", bob, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/users/delbob/mutes/delalice", bob, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/users/delalice/following/delbob", alice, ""), 404, "not_found")
	f.want(f.do("POST", "/v1/stream/tickets", alice, ""), 404, "not_found")
	if _, status := f.tryStream(alice, "", ""); status != 404 {
		t.Fatalf("a deleted user's stream = %d; want 404", status)
	}
	if m := f.do("POST", "/v1/posts", bob, `{"text":"hey @delalice"}`); m.status != 201 || len(m.body["mentions"].([]any)) != 0 {
		t.Fatalf("a post mentioning a deleted user = %d %s; want 201 with no mentions", m.status, m.raw)
	} else {
		f.want(f.do("DELETE", "/v1/posts/"+m.body["id"].(string), bob, ""), 204, "") // its text names her
	}
	// The username and the id stay taken for the grace period.
	f.want(f.do("PUT", "/v1/users/delalice", server, `{"username":"delalice"}`), 409, "conflict")
	f.want(f.do("PUT", "/v1/users/deldave", server, `{"username":"delalice"}`), 409, "conflict")

	// Once the workers ran: the counters of others moved, and the stored data is gone.
	close(hold)
	f.drain()
	gone("after the erasure")
	user := func(id string) map[string]any {
		r := f.do("GET", "/v1/users/"+id, server, "")
		f.want(r, 200, "")
		return r.body
	}
	if b := user("delbob"); b["follower_count"] != float64(1) || b["following_count"] != float64(0) {
		t.Fatalf("bob's counts after alice's erasure: %v followers, %v following; want 1 (carol) and 0", b["follower_count"], b["following_count"])
	}
	post := f.do("GET", "/v1/posts/"+bobPost, bob, "").body
	if post["like_count"] != float64(1) || post["comment_count"] != float64(1) {
		t.Fatalf("bob's post after alice's erasure: %v likes, %v comments; want carol's 1 and 1", post["like_count"], post["comment_count"])
	}
	if c := f.do("GET", "/v1/notifications/unread_count", bob, "").body["count"]; c != float64(3) { // carol's follow, like and comment
		t.Fatalf("bob's unread count after alice's erasure = %v; want 3", c)
	}
	ctx := context.Background()
	for _, q := range []table.Query{
		{PK: "USER#delalice", Index: "GSI1"}, {PK: "COMMENTS#delalice", Index: "GSI1"}, {PK: "LIKED#delalice", Index: "GSI1"},
		{PK: "FOLLOWING#delalice", Index: "GSI1"}, {PK: "FOLLOWEE#delalice", Index: "GSI3"}, {PK: "NOTIFBY#delalice", Index: "GSI1"},
		{PK: "BLOCKED#delalice", Index: "GSI3"}, {PK: "MUTE#delalice"}, {PK: "NOTIF#delalice"}, {PK: "ACT#delalice"},
		{PK: "SCORE#delalice"}, {PK: "STREAK#delalice"}, {PK: "FEED#delalice"}, {PK: "POST#" + alicePosts[0]},
	} {
		p, err := f.store.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		// An erased post leaves the mark that its id was used (the id alone), so no new post takes it.
		if p.Items = slices.DeleteFunc(p.Items, func(it table.Item) bool { return it[table.SK] == "GONE" }); len(p.Items) > 0 {
			t.Fatalf("after the erasure, %s %s still holds %v", q.Index, q.PK, p.Items)
		}
	}
	if ok, err := f.timelines.Exists(ctx, "delalice"); err != nil || ok {
		t.Fatalf("alice's timeline after the erasure: exists %v, %v", ok, err)
	}

	if time.Since(deleted) >= grace {
		t.Fatalf("the checks after the erasure ended %v after the deletion, past the grace period of %v: lengthen it", time.Since(deleted), grace)
	}
	// After the grace period the username, and the id, may be taken again: by a new account.
	time.Sleep(time.Until(deleted.Add(grace + time.Second)))
	f.want(f.do("PUT", "/v1/users/deldave", server, `{"username":"delalice"}`), 201, "")
	r := f.do("PUT", "/v1/users/delalice", server, `{"username":"delalice2"}`)
	f.want(r, 201, "")
	if r.body["follower_count"] != float64(0) || r.body["post_count"] != float64(0) {
		t.Fatalf("a new account under a deleted id = %s; want none of the old one's", r.raw)
	}
	if items := f.do("GET", "/v1/users/delalice/posts", bob, "").body["items"].([]any); !slices.Equal(items, []any{}) {
		t.Fatalf("the new account under a deleted id lists posts: %v", items)
	}
	// The erasure took her out of the mentions of posts: they do not name the new account.
	for _, path := range mentionPaths {
		if got := mentions(path); got != "[]" {
			t.Fatalf("GET %s: carol's post mentions %s after the id was taken again; want []", path, got)
		}
	}
}
