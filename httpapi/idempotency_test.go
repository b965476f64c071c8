package httpapi_test

import (
	"strings"
	"testing"
)

func TestIdempotencyKey(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob := token(t, "alice", false), token(t, "bob", false)
	body := `{"text":"only once"}`

	first := f.do("POST", "/v1/posts", alice, body, "Idempotency-Key", "create-1")
	f.want(first, 201, "")
	again := f.do("POST", "/v1/posts", alice, body, "Idempotency-Key", "create-1")
	if again.status != 201 || again.raw != first.raw || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry = %d %s; want the first result replayed", again.status, again.raw)
	}
	if got := postIDs(f.do("GET", "/v1/users/alice/posts", alice, "").body["items"]); got != first.body["id"] {
		t.Fatalf("alice's posts after a retried create: %s", got)
	}
	f.want(f.do("POST", "/v1/posts", alice, `{"text":"something else"}`, "Idempotency-Key", "create-1"), 409, "conflict")
	// Keys belong to their caller.
	f.want(f.do("POST", "/v1/posts", bob, body, "Idempotency-Key", "create-1"), 201, "")
	// A rejected request is remembered too: its retry gets the same 400.
	bad := f.do("POST", "/v1/posts", alice, `{"text":""}`, "Idempotency-Key", "bad-1")
	f.want(bad, 400, "invalid")
	if r := f.do("POST", "/v1/posts", alice, `{"text":""}`, "Idempotency-Key", "bad-1"); r.status != 400 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry of a 400 = %d %v", r.status, r.header)
	}
	f.want(f.do("POST", "/v1/posts", alice, body, "Idempotency-Key", strings.Repeat("k", 129)), 400, "invalid")
	f.want(f.do("POST", "/v1/posts", alice, body, "Idempotency-Key", "tab\there"), 400, "invalid")

	// Comments too.
	post := first.body["id"].(string)
	c1 := f.do("POST", "/v1/posts/"+post+"/comments", bob, `{"text":"once"}`, "Idempotency-Key", "c-1")
	f.want(c1, 201, "")
	if c2 := f.do("POST", "/v1/posts/"+post+"/comments", bob, `{"text":"once"}`, "Idempotency-Key", "c-1"); c2.raw != c1.raw {
		t.Fatalf("comment retry = %s", c2.raw)
	}
	if n := len(f.do("GET", "/v1/posts/"+post+"/comments", bob, "").body["items"].([]any)); n != 1 {
		t.Fatalf("%d comments after a retried create", n)
	}
}
