package model

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDeleteUser checks the reference itself: a deleted user leaves every list, count, feed,
// notification and export of the others, and their posts take what others left on them along.
func TestDeleteUser(t *testing.T) {
	m := New()
	for _, u := range []string{"ann", "bob", "cy"} {
		m.AddUser(u)
	}
	m.Follow("ann", "bob")
	m.Follow("bob", "ann")
	m.Follow("cy", "ann")
	m.Mute("cy", "bob")
	m.Block("bob", "cy")
	annPost := m.CreatePost("p1", "ann", "hi @bob", false, "2026-11-25T10:00:00.000Z")
	bobPost := m.CreatePost("p2", "bob", "yo", false, "2026-11-25T10:00:01.000Z")
	m.Like("p2", "ann")
	m.Like("p1", "bob")
	m.Comment("p2", "ann", "c1")
	m.Comment("p1", "bob", "c2")
	m.CreatePost("p0", "ann", "old", false, "2026-11-25T09:00:00.000Z")
	m.Comment("p0", "bob", "c0")
	m.Delete("p0") // deleted before the account: bob's comment on it stays, as on anyone's deleted post

	m.DeleteUser("ann")

	if !m.Gone("ann") || m.Gone("bob") || m.Gone("nobody") {
		t.Fatal("Gone is wrong")
	}
	if m.CanFollow("bob", "ann") {
		t.Fatal("a deleted user can be followed")
	}
	if got := m.Followers("bob"); len(got) != 0 {
		t.Fatalf("bob's followers %v", got)
	}
	if !annPost.Deleted || len(annPost.Likes) != 0 || len(annPost.Comments) != 0 {
		t.Fatalf("ann's post %+v", annPost)
	}
	if len(bobPost.Likes) != 0 || len(bobPost.Comments) != 0 {
		t.Fatalf("bob's post keeps ann's like or comment: %+v", bobPost)
	}
	if got := m.Feed("bob"); !slices.Equal(got, []string{"p2"}) {
		t.Fatalf("bob's feed %v", got)
	}
	if req, opt := m.Notifications("bob"); len(req)+len(opt) != 0 {
		t.Fatalf("bob's notifications %v %v", req, opt)
	}
	// bob's like and comment were on ann's post: they went with it.
	want := map[string][]string{"post": {"p2"}, "following": {}, "follower": {}, "comment": {"c0"}, "like": {},
		"block": {"cy"}, "mute": {}}
	if diff := cmp.Diff(want, m.Export("bob")); diff != "" {
		t.Fatalf("bob's export (-want +got):\n%s", diff)
	}
}

func TestExportOf(t *testing.T) {
	body := `{"kind":"profile","data":{"id":"bob"}}
{"kind":"post","data":{"id":"p2"}}
{"kind":"like","data":{"post_id":"p1"}}
{"kind":"following","data":{"user_id":"cy"}}
{"kind":"end","data":{"records":4}}
`
	got, err := ExportOf(body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"post": {"p2"}, "following": {"cy"}, "follower": {}, "comment": {}, "like": {"p1"}, "block": {}, "mute": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"no end record":        `{"kind":"post","data":{"id":"p2"}}`,
		"a miscounted end":     "{\"kind\":\"post\",\"data\":{\"id\":\"p2\"}}\n{\"kind\":\"end\",\"data\":{\"records\":3}}",
		"an error line at end": "{\"kind\":\"post\",\"data\":{\"id\":\"p2\"}}\n{\"kind\":\"error\",\"data\":{}}",
		"a line not JSON":      "oops\n{\"kind\":\"end\",\"data\":{\"records\":1}}",
	} {
		if _, err := ExportOf(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
