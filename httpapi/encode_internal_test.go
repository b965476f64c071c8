package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

// TestPostsReplyJSON: a page of posts, which encodes itself, is the bytes json.Encoder writes for
// it, with and without a next cursor, empty or not; and the reply carries its length.
func TestPostsReplyJSON(t *testing.T) {
	post := rookery.Post{ID: "p1", Author: rookery.Author{ID: "u<1>", Username: "ann"}, Text: "hi & \u2028 \"there\"\n",
		Tags: []string{"go"}, Visibility: rookery.Public, CreatedAt: rookery.Time{Time: time.UnixMilli(1_700_000_000_123)}, LikeCount: 3}
	for _, page := range []app.Page[rookery.Post]{{}, {Items: []rookery.Post{post}}, {Items: []rookery.Post{post, post}, Next: "abc_-"}} {
		var want bytes.Buffer
		json.NewEncoder(&want).Encode(listReply[rookery.Post](reply(page).(postsReply)))
		w := httptest.NewRecorder()
		encode(w, 200, reply(page))
		if got := w.Body.String(); got != want.String() {
			t.Fatalf("encoded\n%s\nwant\n%s", got, want.String())
		}
		if got := w.Header().Get("Content-Length"); got != strconv.Itoa(want.Len()) {
			t.Fatalf("Content-Length %s; the body is %d bytes", got, want.Len())
		}
	}
}

// TestProblemRetryAfter: 429 and 503 always carry Retry-After (their hint, else 1 s); another
// problem only with a hint, as a Conflict that ends by itself has.
func TestProblemRetryAfter(t *testing.T) {
	s := &server{}
	for _, c := range []struct {
		err  error
		want string
	}{
		{rookery.E("op", rookery.RateLimited, "slow down"), "1"},
		{rookery.RetryAfter(rookery.E("op", rookery.RateLimited, "slow down"), 12*time.Second), "12"},
		{rookery.E("op", rookery.Unavailable, "down"), "1"},
		{rookery.RetryAfter(rookery.E("op", rookery.Conflict, "still running"), time.Second), "1"},
		{rookery.E("op", rookery.Conflict, "another body"), ""},
	} {
		w := httptest.NewRecorder()
		s.problem(w, httptest.NewRequest("POST", "/v1/posts", nil), c.err)
		if got := w.Header().Get("Retry-After"); got != c.want {
			t.Errorf("%v: Retry-After %q; want %q", c.err, got, c.want)
		}
	}
}
