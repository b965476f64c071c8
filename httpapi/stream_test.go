package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/internal/sse"
)

// sseEvent is one Server-Sent Event as a client parses it.
type sseEvent struct {
	id, typ, data string
}

func (e sseEvent) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e.data), &m); err != nil {
		t.Fatalf("event %s data %q: %v", e.typ, e.data, err)
	}
	return m
}

// sseClient reads one stream in the background.
type sseClient struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent
	ended  chan struct{}
	cancel context.CancelFunc
}

// openStream opens GET /v1/stream with tok (or ?ticket= in query) and, if lastID is set,
// Last-Event-ID. It fails the test unless the answer is 200.
func (f *fixture) openStream(tok, lastID, query string) *sseClient {
	f.t.Helper()
	c, status := f.tryStream(tok, lastID, query)
	if status != 200 {
		f.t.Fatalf("GET /v1/stream: %d", status)
	}
	return c
}

func (f *fixture) tryStream(tok, lastID, query string) (*sseClient, int) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/stream"+query, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		f.t.Fatalf("stream Content-Type %q", ct)
	}
	c := &sseClient{t: f.t.(testing.TB), resp: resp, events: make(chan sseEvent, 10000), ended: make(chan struct{}), cancel: cancel}
	go c.read()
	f.t.(testing.TB).Cleanup(c.close)
	return c, 200
}

func (c *sseClient) read() {
	defer close(c.ended)
	sse.Read(c.resp.Body, func(e sse.Event) bool {
		if e.Type != "" || e.Data != "" { // an id alone dispatches no event
			c.events <- sseEvent{id: e.ID, typ: e.Type, data: e.Data}
		}
		return true
	})
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
	<-c.ended
}

// next returns the next event, failing the test after 10 s.
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.ended:
		select {
		case ev := <-c.events:
			return ev
		default:
		}
		c.t.Fatal("the stream ended")
	case <-time.After(10 * time.Second):
		c.t.Fatal("no stream event within 10 s")
	}
	return sseEvent{}
}

// nextOf returns the next event, which must be of type typ. Streak events are skipped unless typ
// is streak: a post or a like also records an activity, whose streak event comes in its own time.
func (c *sseClient) nextOf(typ string) sseEvent {
	c.t.Helper()
	ev := c.next()
	for ev.typ == "streak" && typ != "streak" {
		ev = c.next()
	}
	if ev.typ != typ {
		c.t.Fatalf("stream event %s %s; want a %s", ev.typ, ev.data, typ)
	}
	return ev
}

// postID returns the id of the post of a feed.post event.
func postID(t testing.TB, ev sseEvent) string {
	t.Helper()
	post, _ := ev.json(t)["post"].(map[string]any)
	id, _ := post["id"].(string)
	return id
}

// aliceFollowsBobAndCarol returns a fixture with users alice, bob and carol, alice following the
// other two, and their tokens.
func aliceFollowsBobAndCarol(t *testing.T) (f *fixture, alice, bob, carol string) {
	f, _ = newFixture(t)
	alice, bob, carol = token(t, "alice", false), token(t, "bob", false), token(t, "carol", false)
	f.register("alice", "bob", "carol")
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/alice/following/carol", alice, ""), 200, "")
	return f, alice, bob, carol
}

// A stream shows what the feed shows, as it happens: posts of the followed and the reader's own,
// not those of a muted author, removals, notifications with the unread count, and streak changes.
func TestStreamDeliversWhatTheFeedShows(t *testing.T) {
	f, alice, bob, carol := aliceFollowsBobAndCarol(t)
	f.drain()
	s := f.openStream(alice, "", "")

	p1 := f.do("POST", "/v1/posts", bob, `{"text":"one"}`).body["id"].(string)
	ev := s.nextOf("feed.post")
	if postID(t, ev) != p1 || ev.id == "" {
		t.Fatalf("feed.post %+v; want post %s", ev, p1)
	}
	if pos, _ := ev.json(t)["position"].(string); pos == "" {
		t.Fatalf("feed.post without a position: %s", ev.data)
	}
	// The position is a feed cursor: the feed after it holds what is older.
	f.want(f.do("GET", "/v1/feed?cursor="+ev.json(t)["position"].(string), alice, ""), 200, "")

	own := f.do("POST", "/v1/posts", alice, `{"text":"mine"}`).body["id"].(string)
	if got := postID(t, s.nextOf("feed.post")); got != own {
		t.Fatalf("the reader's own post: got %s, want %s", got, own)
	}

	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	rm := s.nextOf("feed.remove").json(t)
	if rm["author_id"] != "carol" || rm["reason"] != "muted" {
		t.Fatalf("feed.remove after a mute: %v", rm)
	}
	f.do("POST", "/v1/posts", carol, `{"text":"muted"}`)
	f.drain()
	p2 := f.do("POST", "/v1/posts", bob, `{"text":"two"}`).body["id"].(string)
	if got := postID(t, s.nextOf("feed.post")); got != p2 { // the muted author's post is not shown
		t.Fatalf("after a muted author's post: got %s, want %s", got, p2)
	}

	f.want(f.do("PUT", "/v1/posts/"+own+"/likes/bob", bob, ""), 200, "")
	n := s.nextOf("notification").json(t)
	if n["unread_count"] != float64(1) || n["notification"].(map[string]any)["type"] != "like" {
		t.Fatalf("notification event %v", n)
	}

	f.want(f.do("POST", "/v1/activities", alice, `{"type":"post","idempotency_key":"k1"}`), 201, "")
	// The post earned points too: its streak event may come first.
	st := s.nextOf("streak").json(t)
	if st["total_points"] != float64(10) {
		st = s.nextOf("streak").json(t)
	}
	if st["current_streak"] != float64(1) || st["total_points"] != float64(10) {
		t.Fatalf("streak event %v", st)
	}

	f.want(f.do("DELETE", "/v1/posts/"+p1, bob, ""), 204, "")
	rm = s.nextOf("feed.remove").json(t)
	if rm["post_id"] != p1 || rm["reason"] != "deleted" {
		t.Fatalf("feed.remove after a delete: %v", rm)
	}
	f.want(f.do("DELETE", "/v1/users/alice/following/bob", alice, ""), 204, "")
	rm = s.nextOf("feed.remove").json(t)
	if rm["author_id"] != "bob" || rm["reason"] != "unfollowed" {
		t.Fatalf("feed.remove after an unfollow: %v", rm)
	}
	// A follow brings the author's recent posts in, oldest first.
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	if got := postID(t, s.nextOf("feed.post")); got != p2 {
		t.Fatalf("after a follow: got %s, want %s (p1 was deleted)", got, p2)
	}
}

// An edited post comes again as a feed.update to the streams whose feed it is in, as each reader
// sees it (liked_by_me is theirs); a muted author's edit reaches nobody who muted them.
func TestStreamPostEdits(t *testing.T) {
	f, alice, bob, carol := aliceFollowsBobAndCarol(t)
	muted := f.do("POST", "/v1/posts", carol, `{"text":"before the mute"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/users/alice/mutes/carol", alice, ""), 204, "")
	f.drain()
	s := f.openStream(alice, "", "")
	own := f.openStream(bob, "", "")

	p := f.do("POST", "/v1/posts", bob, `{"text":"first"}`).body["id"].(string)
	if got := postID(t, s.nextOf("feed.post")); got != p {
		t.Fatalf("feed.post of %s; want %s", got, p)
	}
	own.nextOf("feed.post")
	f.want(f.do("PUT", "/v1/posts/"+p+"/likes/alice", alice, ""), 200, "")
	f.want(f.do("PATCH", "/v1/posts/"+muted, carol, `{"text":"edited while muted"}`), 200, "")
	f.drain()
	f.want(f.do("PATCH", "/v1/posts/"+p, bob, `{"text":"second","visibility":"followers"}`), 200, "")
	for _, c := range []struct {
		s     *sseClient
		liked bool
	}{{s, true}, {own, false}} {
		ev := c.s.next()
		for ev.typ == "streak" || ev.typ == "notification" { // the like's, to bob
			ev = c.s.next()
		}
		if ev.typ != "feed.update" {
			t.Fatalf("stream event %s %s; want a feed.update (not a muted author's)", ev.typ, ev.data)
		}
		post, _ := ev.json(t)["post"].(map[string]any)
		if post["id"] != p || post["text"] != "second" || post["visibility"] != "followers" || post["edited_at"] == nil || post["liked_by_me"] != c.liked {
			t.Fatalf("feed.update %s; want post %s edited, liked_by_me %v", ev.data, p, c.liked)
		}
	}
}

// A client that reconnects with Last-Event-ID gets every event it missed, in order, once: it ends
// with the sequence of a client that never disconnected. Beyond the window it gets a reset.
func TestStreamResumes(t *testing.T) {
	f, _ := newFixture(t)
	alice, bob := token(t, "alice", false), token(t, "bob", false)
	f.register("alice", "bob")
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	f.drain()
	steady := f.openStream(alice, "", "")
	flaky := f.openStream(alice, "", "")
	var want, got []sseEvent
	post := func(i int) { f.want(f.do("POST", "/v1/posts", bob, `{"text":"p`+string(rune('a'+i))+`"}`), 201, "") }
	for i := range 3 {
		post(i)
	}
	for range 3 {
		want = append(want, steady.next())
		got = append(got, flaky.next())
	}
	flaky.close()
	for i := 3; i < 8; i++ {
		post(i)
	}
	for range 5 {
		want = append(want, steady.next())
	}
	resumed := f.openStream(alice, got[len(got)-1].id, "")
	for range 5 {
		got = append(got, resumed.next())
	}
	post(8)
	want, got = append(want, steady.next()), append(got, resumed.next())
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("event %d: resumed %+v; never disconnected %+v", i, got[i], want[i])
		}
	}
	// Resuming from the latest id replays nothing: the next event is a new one.
	again := f.openStream(alice, want[len(want)-1].id, "")
	post(9)
	if ev, w := again.next(), steady.next(); ev != w {
		t.Fatalf("resumed at the head: %+v; want %+v", ev, w)
	}

	// An id the log no longer holds (or never did): a reset, then new events.
	old := f.openStream(alice, "5", "")
	if ev := old.next(); ev.typ != "reset" || ev.id == "" {
		t.Fatalf("resuming from a forgotten id: %+v; want a reset with the head's id", ev)
	}
	post(10)
	if ev, w := old.next(), steady.next(); ev != w {
		t.Fatalf("after the reset: %+v; want %+v", ev, w)
	}
	_, status := f.tryStream(alice, "not-an-id", "")
	if status != 400 {
		t.Fatalf("a malformed Last-Event-ID: %d; want 400", status)
	}
}

// A browser's EventSource sends no Authorization header: a stream ticket opens the stream once,
// and is never logged.
func TestStreamTickets(t *testing.T) {
	f, _ := newFixture(t)
	alice, bob := token(t, "alice", false), token(t, "bob", false)
	f.register("alice", "bob")
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	_, status := f.tryStream("", "", "")
	if status != 401 {
		t.Fatalf("a stream without credentials: %d", status)
	}
	r := f.do("POST", "/v1/stream/tickets", alice, "")
	f.want(r, 201, "")
	ticket, _ := r.body["ticket"].(string)
	if ticket == "" || r.body["expires_at"] == nil {
		t.Fatalf("ticket reply %s", r.raw)
	}
	s := f.openStream("", "", "?ticket="+ticket)
	f.drain()
	p := f.do("POST", "/v1/posts", bob, `{"text":"hi"}`).body["id"].(string)
	if got := postID(t, s.nextOf("feed.post")); got != p {
		t.Fatalf("ticket stream got %s, want %s", got, p)
	}
	if _, status := f.tryStream("", "", "?ticket="+ticket); status != 401 {
		t.Fatalf("a used ticket: %d; want 401", status)
	}
	if _, status := f.tryStream("", "", "?ticket=nope"); status != 401 {
		t.Fatalf("an unknown ticket: %d; want 401", status)
	}
	if strings.Contains(f.logs.String(), ticket) || strings.Contains(f.logs.String(), alice) {
		t.Fatal("a ticket or token is in the logs")
	}
}

// A stream ends when its token expires.
func TestStreamEndsWithItsToken(t *testing.T) {
	f, _ := newFixture(t)
	f.register("alice")
	// auth allows 5 s of clock skew: this token is accepted for about one more second.
	tok, err := auth.Mint(secret, "alice", false, -4*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := f.openStream(tok, "", "")
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its token")
	}
}

// A celebrity's posts, which fan-out skips (the feed merges them at read time), reach the streams
// of those who follow them, and only theirs.
func TestStreamCelebrityPosts(t *testing.T) {
	f, _ := newFixtureWith(t, fixtureConfig{celebrityThreshold: 1})
	alice, bob, carol, dave := token(t, "alice", false), token(t, "bob", false), token(t, "carol", false), token(t, "dave", false)
	f.register("alice", "bob", "carol", "dave")
	f.want(f.do("PUT", "/v1/users/alice/following/bob", alice, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/carol/following/bob", carol, ""), 200, "")
	f.drain()
	follower, other := f.openStream(alice, "", ""), f.openStream(dave, "", "")
	p := f.do("POST", "/v1/posts", bob, `{"text":"famous"}`).body["id"].(string)
	if got := postID(t, follower.nextOf("feed.post")); got != p {
		t.Fatalf("a follower's stream got %s; want the celebrity's %s", got, p)
	}
	own := f.do("POST", "/v1/posts", dave, `{"text":"mine"}`).body["id"].(string)
	if got := postID(t, other.nextOf("feed.post")); got != own { // and nothing of bob's before it
		t.Fatalf("a non-follower's stream got %s; want only their own %s", got, own)
	}
}
