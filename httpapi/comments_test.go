package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
)

func TestCommentsThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false)
	post := f.do("POST", "/v1/posts", alice, `{"text":"discuss"}`).body["id"].(string)
	priv := f.do("POST", "/v1/posts", alice, `{"text":"friends","visibility":"followers"}`).body["id"].(string)
	base := "/v1/posts/" + post + "/comments"
	c1, c2 := ulid.Make().String(), ulid.Make().String()

	r := f.do("POST", base, bob, `{"id":"`+c1+`","text":"first"}`)
	f.want(r, 201, "")
	if r.body["post_id"] != post || r.body["author"].(map[string]any)["id"] != "bob" || r.body["text"] != "first" {
		t.Fatalf("comment = %s", r.raw)
	}
	// The same id again is the same comment (200); the same id with other text is a conflict.
	f.want(f.do("POST", base, bob, `{"id":"`+c1+`","text":"first"}`), 200, "")
	f.want(f.do("POST", base, bob, `{"id":"`+c1+`","text":"changed"}`), 409, "conflict")
	f.want(f.do("POST", base, carol, `{"id":"`+c2+`","text":"second"}`), 201, "")
	f.want(f.do("POST", base, alice, `{"text":"third, by the author"}`), 201, "")
	f.want(f.do("POST", base, bob, `{"text":""}`), 400, "invalid")
	f.want(f.do("POST", base, bob, `{"text":" \n\t "}`), 400, "invalid")
	f.want(f.do("POST", base, bob, `{"text":"`+strings.Repeat("x", 2001)+`"}`), 400, "invalid")
	f.want(f.do("POST", base, bob, `{"id":"not-a-ulid","text":"x"}`), 400, "invalid")
	f.want(f.do("POST", base, bob, `{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","text":"from 2016"}`), 400, "invalid")
	// A followers post cannot be commented on or read by a stranger.
	f.want(f.do("POST", "/v1/posts/"+priv+"/comments", carol, `{"text":"hi"}`), 404, "not_found")
	f.want(f.do("GET", "/v1/posts/"+priv+"/comments", carol, ""), 404, "not_found")

	// Oldest first, paged.
	r = f.do("GET", base+"?limit=2", carol, "")
	var texts []string
	for _, c := range r.body["items"].([]any) {
		texts = append(texts, c.(map[string]any)["text"].(string))
	}
	if strings.Join(texts, "|") != "first|second" || r.body["next_cursor"] == nil {
		t.Fatalf("page 1 = %s", r.raw)
	}
	r = f.do("GET", base+"?limit=2&cursor="+r.body["next_cursor"].(string), carol, "")
	if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["text"] != "third, by the author" || r.body["next_cursor"] != nil {
		t.Fatalf("page 2 = %s", r.raw)
	}
	eventuallyHTTP(t, "comment_count", func() error {
		if c := f.do("GET", "/v1/posts/"+post, bob, "").body["comment_count"]; c != float64(3) {
			return fmt.Errorf("comment_count = %v", c)
		}
		return nil
	})

	// Deleting: the comment's author, the post's author, or the server; nobody else.
	f.want(f.do("DELETE", base+"/"+c1, carol, ""), 403, "forbidden")
	f.want(f.do("DELETE", base+"/"+c1, bob, ""), 204, "")
	f.want(f.do("DELETE", base+"/"+c2, alice, ""), 204, "")
	f.want(f.do("DELETE", base+"/"+c2, alice, ""), 404, "not_found")
	f.want(f.do("DELETE", base+"/bad%23id", alice, ""), 400, "invalid")
	eventuallyHTTP(t, "comment_count after deletes", func() error {
		if c := f.do("GET", "/v1/posts/"+post, bob, "").body["comment_count"]; c != float64(1) {
			return fmt.Errorf("comment_count = %v", c)
		}
		return nil
	})
}
