package httpapi_test

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func postIDs(items any) string {
	var out []string
	for _, it := range items.([]any) {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return strings.Join(out, ",")
}

func TestPostsThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`","display_name":"`+strings.ToUpper(u)+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false)
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")

	// Create: tags from the field and #hashtags, lower-cased, once; mentions of existing users.
	r := f.do("POST", "/v1/posts", alice, `{"text":"Hello #Go world @bob @nobody #feeds","tags":["go","Rookery"],"media":[{"id":"img-1","type":"image"}]}`)
	f.want(r, 201, "")
	pub := r.body["id"].(string)
	if fmt.Sprint(r.body["tags"]) != "[go rookery feeds]" || fmt.Sprint(r.body["mentions"]) != "[bob]" ||
		r.body["visibility"] != "public" || r.body["edited_at"] != nil || r.body["liked_by_me"] != false ||
		r.body["author"].(map[string]any)["display_name"] != "ALICE" {
		t.Fatalf("created post = %s", r.raw)
	}
	// A client-chosen ULID makes a retry safe: the same body again returns the same post, 200.
	body := `{"id":"01JD0000000000000000000000","text":"for followers #go","visibility":"followers"}`
	time.Sleep(2 * time.Millisecond) // a later millisecond: lists order by time, then id
	r = f.do("POST", "/v1/posts", alice, body)
	f.want(r, 201, "")
	priv := r.body["id"].(string)
	if r := f.do("POST", "/v1/posts", alice, body); r.status != 200 || r.body["id"] != priv {
		t.Fatalf("retry = %d %s", r.status, r.raw)
	}
	f.want(f.do("POST", "/v1/posts", alice, `{"id":"01JD0000000000000000000000","text":"something else"}`), 409, "conflict")
	f.want(f.do("POST", "/v1/posts", bob, body), 409, "conflict")

	// Visibility, on every read path: bob follows alice, carol does not.
	for _, c := range []struct {
		who, tok string
		want     string
	}{{"the author", alice, priv + "," + pub}, {"a follower", bob, priv + "," + pub}, {"a stranger", carol, pub}} {
		if got := postIDs(f.do("GET", "/v1/users/alice/posts", c.tok, "").body["items"]); got != c.want {
			t.Errorf("%s sees alice's posts %s; want %s", c.who, got, c.want)
		}
		if got := postIDs(f.do("GET", "/v1/tags/go/posts", c.tok, "").body["items"]); got != c.want {
			t.Errorf("%s sees #go posts %s; want %s", c.who, got, c.want)
		}
	}
	f.want(f.do("GET", "/v1/posts/"+priv, bob, ""), 200, "")
	f.want(f.do("GET", "/v1/posts/"+priv, carol, ""), 404, "not_found")
	f.want(f.do("PATCH", "/v1/posts/"+priv, carol, `{"text":"x"}`), 404, "not_found")
	f.want(f.do("DELETE", "/v1/posts/"+priv, carol, ""), 404, "not_found")
	if got := postIDs(f.do("GET", "/v1/tags/GO/posts", carol, "").body["items"]); got != pub {
		t.Errorf("tag lookup is case-insensitive: %s", got)
	}

	// Edit: author only; tags follow the text; edited_at is set.
	f.want(f.do("PATCH", "/v1/posts/"+pub, bob, `{"text":"mine now"}`), 403, "forbidden")
	r = f.do("PATCH", "/v1/posts/"+pub, alice, `{"text":"Edited #rust"}`)
	f.want(r, 200, "")
	if r.body["edited_at"] == nil || fmt.Sprint(r.body["tags"]) != "[go rookery rust]" || r.body["text"] != "Edited #rust" {
		t.Fatalf("edited = %s", r.raw)
	}
	// An edit that changes nothing (empty, or the same again) leaves the post as it is.
	time.Sleep(2 * time.Millisecond) // a later millisecond: a new edited_at would differ
	for _, same := range []string{`{}`, `{"text":"Edited #rust"}`, `{"text":"Edited #rust","tags":["go","rookery"],"visibility":"public"}`} {
		if r2 := f.do("PATCH", "/v1/posts/"+pub, alice, same); r2.status != 200 || r2.body["edited_at"] != r.body["edited_at"] {
			t.Errorf("PATCH %s = %d, edited_at %v; want 200 and %v as before", same, r2.status, r2.body["edited_at"], r.body["edited_at"])
		}
	}
	if got := postIDs(f.do("GET", "/v1/tags/feeds/posts", alice, "").body["items"]); got != "" {
		t.Errorf("#feeds still lists %s after the edit removed it", got)
	}
	if got := postIDs(f.do("GET", "/v1/tags/rust/posts", carol, "").body["items"]); got != pub {
		t.Errorf("#rust lists %q", got)
	}

	// Delete: author or server; then gone from every route.
	f.want(f.do("DELETE", "/v1/posts/"+pub, bob, ""), 403, "forbidden")
	f.want(f.do("DELETE", "/v1/posts/"+pub, alice, ""), 204, "")
	f.want(f.do("GET", "/v1/posts/"+pub, alice, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/posts/"+pub, alice, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/posts/"+priv, server, ""), 204, "")
	eventuallyHTTP(t, "lists empty after deletes", func() error {
		if got := postIDs(f.do("GET", "/v1/users/alice/posts", alice, "").body["items"]); got != "" {
			return fmt.Errorf("alice's posts: %s", got)
		}
		if got := postIDs(f.do("GET", "/v1/tags/go/posts", alice, "").body["items"]); got != "" {
			return fmt.Errorf("#go: %s", got)
		}
		return nil
	})

	// Bad input.
	long := strings.Repeat("é", 5001)
	for name, c := range map[string]struct{ body, field string }{
		"empty text":     {`{"text":""}`, "text"},
		"blank text":     {`{"text":"   "}`, "text"},
		"text too long":  {`{"text":"` + long + `"}`, "text"},
		"eleven tags":    {`{"text":"x","tags":["a","b","c","d","e","f","g","h","i","j","k"]}`, "tags"},
		"a bad tag":      {`{"text":"x","tags":["no#sep"]}`, "tags"},
		"bad visibility": {`{"text":"x","visibility":"friends"}`, "visibility"},
		"an id not ULID": {`{"id":"POST#1","text":"x"}`, "id"},
		"an unknown key": {`{"text":"x","pinned":true}`, "pinned"},
		"bad media":      {`{"text":"x","media":[{"id":"a#b","type":"image"}]}`, "media"},
	} {
		r := f.do("POST", "/v1/posts", alice, c.body)
		f.want(r, 400, "invalid")
		fields, _ := r.body["fields"].([]any)
		if len(fields) == 0 || fields[0].(map[string]any)["name"] != c.field {
			t.Errorf("%s: fields %v; want %s", name, r.body["fields"], c.field)
		}
	}
	// An unknown key in a nested object is refused too (the decoder finds it; it is not named).
	f.want(f.do("POST", "/v1/posts", alice, `{"text":"x","media":[{"id":"m1","type":"image","colour":"red"}]}`), 400, "invalid")
	f.want(f.do("GET", "/v1/posts/bad%23id", alice, ""), 400, "invalid")
	f.want(f.do("POST", "/v1/posts", server, `{"text":"whose?"}`), 400, "invalid")
	if r := f.do("POST", "/v1/posts", server, `{"text":"for carol"}`, "X-On-Behalf-Of", "carol"); r.status != 201 || r.body["author"].(map[string]any)["id"] != "carol" {
		t.Fatalf("server post on behalf of carol = %d %s", r.status, r.raw)
	}

	// post_count is kept by the counters consumer: alice made 2 and deleted both; carol made 1.
	eventuallyHTTP(t, "post counts", func() error {
		a := f.do("GET", "/v1/users/alice", alice, "").body
		c := f.do("GET", "/v1/users/carol", alice, "").body
		if a["post_count"] != float64(0) || c["post_count"] != float64(1) {
			return fmt.Errorf("alice %v, carol %v", a["post_count"], c["post_count"])
		}
		return nil
	})
}

// TestDeletedPostIDIsNotReused: a deleted post keeps the likes and comments others left on it, so
// a client's id of a deleted post is refused for a new post, by its author as by anyone else;
// otherwise the new post would show the old one's likes and comments as its own.
func TestDeletedPostIDIsNotReused(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "alice", "bob")
	alice, bob := toks["alice"], toks["bob"]
	const id = "01JD0000000000000000000001"
	body := `{"id":"` + id + `","text":"short-lived"}`
	f.want(f.do("POST", "/v1/posts", alice, body), 201, "")
	f.want(f.do("PUT", "/v1/posts/"+id+"/likes/bob", bob, ""), 200, "")
	f.want(f.do("POST", "/v1/posts/"+id+"/comments", bob, `{"text":"nice"}`), 201, "")
	f.want(f.do("DELETE", "/v1/posts/"+id, alice, ""), 204, "")

	for who, tok := range map[string]string{"its author": alice, "another user": bob} {
		for _, b := range []string{body, `{"id":"` + id + `","text":"a new post"}`} {
			if r := f.do("POST", "/v1/posts", tok, b); r.status != 409 || r.body["code"] != "conflict" ||
				!strings.Contains(r.body["detail"].(string), "deleted") {
				t.Errorf("%s posts %s under the deleted id: %d %s", who, b, r.status, r.raw)
			}
		}
	}
	f.want(f.do("GET", "/v1/posts/"+id, bob, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/posts/"+id+"/likes", bob, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/posts/"+id+"/comments", bob, ""), 404, "not_found")
	// Another client id is still free.
	f.want(f.do("POST", "/v1/posts", alice, `{"id":"01JD0000000000000000000002","text":"short-lived"}`), 201, "")
}

// TestAuthorPostsPaging: an author's posts page to the end, newest first (by time, then id), each
// once, with cursors that another list refuses; a post deleted is gone from the pages.
// TestTagsInEveryScript: a #hashtag takes in the combining marks that Indic and Thai words are
// written with, and the joiners of Persian; a tag typed decomposed (e + U+0301) is the same tag
// as one typed composed, in a post and in a lookup.
func TestTagsInEveryScript(t *testing.T) {
	f, _ := newFixture(t)
	alice := token(t, "alice", false)
	f.want(f.do("PUT", "/v1/users/alice", alice, `{"username":"alice"}`), 201, "")
	text := "#हिन्दी #ภาษาไทย #cafe\u0301 #Café #می\u200cخواهم"
	r := f.do("POST", "/v1/posts", alice, `{"text":"`+text+`","tags":["Cafe\u0301s"]}`)
	f.want(r, 201, "")
	want := []string{"cafés", "हिन्दी", "ภาษาไทย", "café", "می\u200cخواهم"}
	if got := fmt.Sprint(r.body["tags"]); got != fmt.Sprint(want) {
		t.Fatalf("tags %s; want %s", got, fmt.Sprint(want))
	}
	id := r.body["id"].(string)
	for _, tag := range []string{"हिन्दी", "ภาษาไทย", "cafe\u0301", "CAFÉ", "cafés", "می\u200cخواهم"} {
		if got := postIDs(f.do("GET", "/v1/tags/"+url.PathEscape(tag)+"/posts", alice, "").body["items"]); got != id {
			t.Errorf("#%s lists %q; want the post", tag, got)
		}
	}
	f.want(f.do("GET", "/v1/tags/"+url.PathEscape("a-b")+"/posts", alice, ""), 400, "invalid")
	// 64 characters composed are a tag, though 128 decomposed.
	long := strings.Repeat("e\u0301", 64)
	r = f.do("POST", "/v1/posts", alice, `{"text":"#`+long+`","tags":["`+long+`"]}`)
	f.want(r, 201, "")
	if got := fmt.Sprint(r.body["tags"]); got != "["+strings.Repeat("é", 64)+"]" {
		t.Fatalf("a long decomposed tag: %s", got)
	}
}

// TestHashtagsAndMentionsBeginWords: a # or @ inside a word is no hashtag or mention: a URL's
// fragment, an HTML entity, an email address; and a name longer than a tag or username may be is
// none, rather than another one cut short.
func TestHashtagsAndMentionsBeginWords(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"alice", "bob", "carol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice := token(t, "alice", false)
	text := "docs at https://example.com/start#install and x.com/#faq, write to me@bob.com or (@carol); " +
		"#go#rust it&#39;s #" + strings.Repeat("a", 65) + " @" + strings.Repeat("b", 31) + " #ok @bob."
	r := f.do("POST", "/v1/posts", alice, `{"text":"`+text+`"}`)
	f.want(r, 201, "")
	if tags, ments := fmt.Sprint(r.body["tags"]), fmt.Sprint(r.body["mentions"]); tags != "[go ok]" || ments != "[carol bob]" {
		t.Fatalf("tags %s and mentions %s; want [go ok] and [carol bob]", tags, ments)
	}
}

func TestAuthorPostsPaging(t *testing.T) {
	f, _ := newFixtureWith(t, fixtureConfig{})
	toks := f.register("a", "r")
	a, r := toks[0], toks[1]
	type pos struct{ at, id string }
	var made []pos
	for i := range 25 {
		reply := f.do("POST", "/v1/posts", a, fmt.Sprintf(`{"text":"post %d"}`, i))
		f.want(reply, 201, "")
		made = append(made, pos{reply.body["created_at"].(string), reply.body["id"].(string)})
		if i%3 == 0 {
			time.Sleep(2 * time.Millisecond) // some posts share a millisecond: then the id orders them
		}
	}
	slices.SortFunc(made, func(x, y pos) int { // newest first: by time (RFC 3339 in UTC, ms), then id
		return cmp.Or(strings.Compare(y.at, x.at), strings.Compare(y.id, x.id))
	})
	var ids []string
	for _, p := range made {
		ids = append(ids, p.id)
	}
	pages := func(limit int) (got []string, cursors []string) {
		t.Helper()
		cursor := ""
		for range 100 {
			reply := f.do("GET", fmt.Sprintf("/v1/users/a/posts?limit=%d&cursor=%s", limit, cursor), r, "")
			f.want(reply, 200, "")
			if page := postIDs(reply.body["items"]); page != "" {
				got = append(got, strings.Split(page, ",")...)
			}
			next, ok := reply.body["next_cursor"].(string)
			if !ok {
				return got, cursors
			}
			cursors = append(cursors, next)
			cursor = next
		}
		t.Fatal("paging does not end")
		return nil, nil
	}
	got, cursors := pages(10)
	if strings.Join(got, ",") != strings.Join(ids, ",") || len(cursors) != 2 {
		t.Fatalf("pages of 10 = %v (%d cursors); want %v", got, len(cursors), ids)
	}
	if got, cursors := pages(25); strings.Join(got, ",") != strings.Join(ids, ",") || len(cursors) != 0 { // a full last page: no cursor
		t.Fatalf("one page of 25 = %v (%d cursors); want %v and none", got, len(cursors), ids)
	}
	f.want(f.do("GET", "/v1/users/r/posts?cursor="+cursors[0], r, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/feed?cursor="+cursors[0], r, ""), 400, "invalid")

	f.want(f.do("DELETE", "/v1/posts/"+ids[12], a, ""), 204, "")
	want := slices.Delete(slices.Clone(ids), 12, 13)
	if got, _ := pages(10); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after a delete, pages of 10 = %v; want %v", got, want)
	}
}

// TestMentionsFollowRenamesAndDeletions: a mention names whoever holds the username when the post
// is made, after renames, a name taken up again and an account deleted (the embedded store's only
// writer keeps usernames' claims in memory, and must learn of each change).
func TestMentionsFollowRenamesAndDeletions(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"mnalice", "mnbob", "mncarol"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	alice, bob, carol := token(t, "mnalice", false), token(t, "mnbob", false), token(t, "mncarol", false)
	mentions := func(text string) string {
		t.Helper()
		r := f.do("POST", "/v1/posts", alice, `{"text":"`+text+`"}`)
		f.want(r, 201, "")
		return fmt.Sprint(r.body["mentions"])
	}
	if got := mentions("hi @MNbob @mncarol @mnnobody"); got != "[mnbob mncarol]" {
		t.Fatalf("mentions = %s; want [mnbob mncarol]", got)
	}
	f.want(f.do("PUT", "/v1/users/mnbob", bob, `{"username":"mnbobby"}`), 200, "")
	if got := mentions("hi @mnbob"); got != "[]" {
		t.Fatalf("a renamed user's old name mentions %s; want []", got)
	}
	if got := mentions("hi @mnbobby"); got != "[mnbob]" {
		t.Fatalf("a renamed user's new name mentions %s; want [mnbob]", got)
	}
	f.want(f.do("PUT", "/v1/users/mncarol", carol, `{"username":"mnbob"}`), 200, "")
	if got := mentions("hi @mnbob @mncarol"); got != "[mncarol]" {
		t.Fatalf("a name taken up again mentions %s; want [mncarol]", got)
	}
	f.want(f.do("DELETE", "/v1/users/mncarol", carol, ""), 204, "")
	if got := mentions("hi @mnbob"); got != "[]" {
		t.Fatalf("a deleted user's name mentions %s; want []", got)
	}
}

// TestConcurrentEdits: edits of one post made at once leave it as one of them made it, its tag
// pages too: each lists the post exactly when its tags hold the tag.
func TestConcurrentEdits(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.users(t, "eddie")
	id := f.do("POST", "/v1/posts", toks["eddie"], `{"text":"first #t0"}`).body["id"].(string)
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.want(f.do("PATCH", "/v1/posts/"+id, toks["eddie"], fmt.Sprintf(`{"text":"round %d #t%d"}`, round, i)), 200, "")
			}()
		}
		wg.Wait()
		post := f.do("GET", "/v1/posts/"+id, toks["eddie"], "").body
		for i := range 8 {
			tag := fmt.Sprintf("t%d", i)
			listed := len(f.do("GET", "/v1/tags/"+tag+"/posts", toks["eddie"], "").body["items"].([]any)) > 0
			if has := slices.Contains(post["tags"].([]any), any(tag)); listed != has {
				t.Fatalf("round %d: the post's tags are %v, and the page of #%s lists it: %v", round, post["tags"], tag, listed)
			}
		}
	}
}
