package rookery_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rookery "github.com/rookery/rookery/sdk/go"
	"github.com/rookery/rookery/sdk/go/api"
)

// The SDK against the real binary: TestMain builds cmd/rookery from this repository; each test
// starts `rookery serve` on a free port with a data directory of its own.

var binary string

var secret = []byte("sdk-test-secret-sdk-test-secret-0123456789")

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rookery-sdk-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "rookery")
	build := exec.Command("go", "build", "-o", binary, "./cmd/rookery")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building rookery: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serve starts the server with args and returns its base URL.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn",
		"--webhooks-allow-http", "--webhooks-allow-private"}, args...)...)
	cmd.Env = append(os.Environ(), "ROOKERY_AUTH_SECRET="+string(secret))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	_, rest, ok := strings.Cut(line, "listening on ")
	if err != nil || !ok {
		t.Fatalf("rookery serve printed %q: %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return strings.Fields(rest)[0]
}

func client(t *testing.T, base string, tok string, opts ...rookery.Option) *rookery.Client {
	t.Helper()
	c, err := rookery.New(base, append([]rookery.Option{rookery.WithToken(tok)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func token(t *testing.T, user string) string {
	t.Helper()
	tok, err := rookery.MintUserToken(secret, user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ok fails the test unless a generated call succeeded.
func ok(t *testing.T, what string, resp *http.Response, body []byte, err error) {
	t.Helper()
	if err := rookery.Check(resp, body, err); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for it, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// TestEveryRoute calls every operation of the API through the SDK at least once, lists across
// pages with the iterators, and verifies a webhook delivery.
func TestEveryRoute(t *testing.T) {
	base := serve(t)
	ctx := context.Background()
	srvTok, err := rookery.MintServerToken(secret, "app", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server := client(t, base, srvTok)
	ann, bob := client(t, base, token(t, "ann")), client(t, base, token(t, "bob"))

	h, err := server.HealthWithResponse(ctx)
	ok(t, "health", h.HTTPResponse, h.Body, err)
	rd, err := server.ReadinessWithResponse(ctx)
	ok(t, "readiness", rd.HTTPResponse, rd.Body, err)
	mt, err := server.MetricsWithResponse(ctx)
	ok(t, "metrics", mt.HTTPResponse, mt.Body, err)

	for _, u := range []string{"ann", "bob"} {
		r, err := server.PutUserWithResponse(ctx, u, api.UserInput{Username: u + "_sdk", Timezone: ptr("Europe/Berlin")})
		ok(t, "put user", r.HTTPResponse, r.Body, err)
	}
	// A typed error: an unknown user.
	gu, err := ann.GetUserWithResponse(ctx, "nobody")
	if err := rookery.Check(gu.HTTPResponse, gu.Body, err); !rookery.IsCode(err, "not_found") {
		t.Fatalf("an unknown user: %v; want not_found", err)
	}
	gu, err = ann.GetUserWithResponse(ctx, "bob")
	ok(t, "get user", gu.HTTPResponse, gu.Body, err)
	if gu.JSON200.Username != "bob_sdk" {
		t.Fatalf("bob = %+v", gu.JSON200)
	}
	un, err := ann.GetUserByUsernameWithResponse(ctx, "BOB_sdk")
	ok(t, "by username", un.HTTPResponse, un.Body, err)

	// An account deleted by its user is gone at once.
	r, err := server.PutUserWithResponse(ctx, "gone", api.UserInput{Username: "gone_sdk"})
	ok(t, "put user", r.HTTPResponse, r.Body, err)
	du, err := client(t, base, token(t, "gone")).DeleteUserWithResponse(ctx, "gone")
	ok(t, "delete user", du.HTTPResponse, du.Body, err)
	gu, err = ann.GetUserWithResponse(ctx, "gone")
	if err := rookery.Check(gu.HTTPResponse, gu.Body, err); !rookery.IsCode(err, "not_found") {
		t.Fatalf("a deleted user: %v; want not_found", err)
	}

	f, err := bob.FollowUserWithResponse(ctx, "bob", "ann")
	ok(t, "follow", f.HTTPResponse, f.Body, err)
	gf, err := bob.GetFollowWithResponse(ctx, "bob", "ann")
	ok(t, "get follow", gf.HTTPResponse, gf.Body, err)
	if got := collect(t, ann.Followers(ctx, "ann", 1)); len(got) != 1 || got[0].UserId != "bob" {
		t.Fatalf("ann's followers %+v", got)
	}
	if got := collect(t, bob.Following(ctx, "bob", 1)); len(got) != 1 {
		t.Fatalf("bob's following %+v", got)
	}

	// Posts, then bob's feed across pages of 4.
	var ids []string
	for i := range 9 {
		p, err := ann.CreatePostWithResponse(ctx, nil, api.PostInput{Text: fmt.Sprintf("post %d #sdk", i)})
		ok(t, "create post", p.HTTPResponse, p.Body, err)
		ids = append(ids, p.JSON201.Id)
	}
	eventually(t, "bob's feed holds ann's 9 posts", func() bool { return len(collect(t, bob.HomeFeed(ctx, 4))) == 9 })
	feed := collect(t, bob.HomeFeed(ctx, 4))
	for i, p := range feed {
		if p.Id != ids[len(ids)-1-i] {
			t.Fatalf("feed[%d] = %s; want %s (newest first)", i, p.Id, ids[len(ids)-1-i])
		}
	}
	if got := collect(t, bob.UserPosts(ctx, "ann", 5)); len(got) != 9 {
		t.Fatalf("ann's posts: %d", len(got))
	}
	eventually(t, "the tag lists 9 posts", func() bool { return len(collect(t, bob.TagPosts(ctx, "sdk", 5))) == 9 })
	gp, err := bob.GetPostWithResponse(ctx, ids[0])
	ok(t, "get post", gp.HTTPResponse, gp.Body, err)
	ep, err := ann.EditPostWithResponse(ctx, ids[0], api.PostEdit{Text: ptr("edited")})
	ok(t, "edit post", ep.HTTPResponse, ep.Body, err)

	lk, err := bob.LikePostWithResponse(ctx, ids[1], "bob")
	ok(t, "like", lk.HTTPResponse, lk.Body, err)
	if got := collect(t, ann.Likes(ctx, ids[1], 10)); len(got) != 1 {
		t.Fatalf("likes %+v", got)
	}
	cm, err := bob.AddCommentWithResponse(ctx, ids[1], nil, api.CommentInput{Text: "nice"})
	ok(t, "comment", cm.HTTPResponse, cm.Body, err)
	if got := collect(t, ann.Comments(ctx, ids[1], 10)); len(got) != 1 || got[0].Text != "nice" {
		t.Fatalf("comments %+v", got)
	}
	eventually(t, "ann has 3 notifications (follow, like, comment)", func() bool { return len(collect(t, ann.Notifications(ctx, true, 2))) == 3 })
	uc, err := ann.GetUnreadCountWithResponse(ctx)
	ok(t, "unread count", uc.HTTPResponse, uc.Body, err)
	mr, err := ann.MarkNotificationsReadWithResponse(ctx, api.MarkNotificationsReadJSONRequestBody{All: ptr(true)})
	ok(t, "mark read", mr.HTTPResponse, mr.Body, err)
	dc, err := bob.DeleteCommentWithResponse(ctx, ids[1], cm.JSON201.Id)
	ok(t, "delete comment", dc.HTTPResponse, dc.Body, err)
	ul, err := bob.UnlikePostWithResponse(ctx, ids[1], "bob")
	ok(t, "unlike", ul.HTTPResponse, ul.Body, err)
	dp, err := ann.DeletePostWithResponse(ctx, ids[2])
	ok(t, "delete post", dp.HTTPResponse, dp.Body, err)

	mu, err := bob.MuteUserWithResponse(ctx, "bob", "ann")
	ok(t, "mute", mu.HTTPResponse, mu.Body, err)
	gm, err := bob.GetMuteWithResponse(ctx, "bob", "ann")
	ok(t, "get mute", gm.HTTPResponse, gm.Body, err)
	if got := collect(t, bob.Mutes(ctx, "bob", 1)); len(got) != 1 || got[0].UserId != "ann" {
		t.Fatalf("bob's mutes %+v", got)
	}
	um, err := bob.UnmuteUserWithResponse(ctx, "bob", "ann")
	ok(t, "unmute", um.HTTPResponse, um.Body, err)
	bl, err := bob.BlockUserWithResponse(ctx, "bob", "ann")
	ok(t, "block", bl.HTTPResponse, bl.Body, err)
	gb, err := bob.GetBlockWithResponse(ctx, "bob", "ann")
	ok(t, "get block", gb.HTTPResponse, gb.Body, err)
	if got := collect(t, bob.Blocks(ctx, "bob", 1)); len(got) != 1 || got[0].UserId != "ann" || gb.JSON200.BlockedAt != got[0].BlockedAt {
		t.Fatalf("bob's blocks %+v", got)
	}
	ub, err := bob.UnblockUserWithResponse(ctx, "bob", "ann")
	ok(t, "unblock", ub.HTTPResponse, ub.Body, err)
	uf, err := bob.UnfollowUserWithResponse(ctx, "bob", "ann")
	ok(t, "unfollow", uf.HTTPResponse, uf.Body, err)

	// Engagement.
	ac, err := ann.RecordActivityWithResponse(ctx, api.ActivityInput{Type: "daily_open", IdempotencyKey: "open-1"})
	ok(t, "activity", ac.HTTPResponse, ac.Body, err)
	st, err := ann.GetStreakWithResponse(ctx, "ann")
	ok(t, "streak", st.HTTPResponse, st.Body, err)
	pt, err := ann.GetPointsWithResponse(ctx, "ann", &api.GetPointsParams{Days: ptr(7)})
	ok(t, "points", pt.HTTPResponse, pt.Body, err)
	sb, err := ann.GetStreakLeaderboardWithResponse(ctx, nil)
	ok(t, "streak board", sb.HTTPResponse, sb.Body, err)
	ab, err := ann.GetAuthorLeaderboardWithResponse(ctx, nil)
	ok(t, "author board", ab.HTTPResponse, ab.Body, err)

	// Streams: a ticket (the stream itself: TestStreamResumes).
	tk, err := ann.CreateStreamTicketWithResponse(ctx)
	ok(t, "stream ticket", tk.HTTPResponse, tk.Body, err)

	// Webhooks: a receiver that verifies what it gets with the SDK.
	verified := make(chan error, 10)
	var secretMu sync.Mutex
	var whSecret string
	recv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		secretMu.Lock()
		s := whSecret
		secretMu.Unlock()
		verified <- rookery.VerifyWebhook(s, r.Header, body, 0)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go recv.Serve(l)
	defer recv.Close()
	cw, err := server.CreateWebhookWithResponse(ctx, api.WebhookInput{Url: ptr("http://" + l.Addr().String() + "/hook"),
		Events: &[]api.WebhookInputEvents{api.WebhookInputEventsPostCreated}})
	ok(t, "create webhook", cw.HTTPResponse, cw.Body, err)
	secretMu.Lock()
	whSecret = *cw.JSON201.Secret
	secretMu.Unlock()
	tw, err := server.TestWebhookWithResponse(ctx, cw.JSON201.Id)
	ok(t, "test webhook", tw.HTTPResponse, tw.Body, err)
	select {
	case err := <-verified:
		if err != nil {
			t.Fatalf("the webhook delivery does not verify: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook delivery")
	}
	lw, err := server.ListWebhooksWithResponse(ctx)
	ok(t, "list webhooks", lw.HTTPResponse, lw.Body, err)
	gw, err := server.GetWebhookWithResponse(ctx, cw.JSON201.Id)
	ok(t, "get webhook", gw.HTTPResponse, gw.Body, err)
	uw, err := server.UpdateWebhookWithResponse(ctx, cw.JSON201.Id, api.WebhookInput{Description: ptr("sdk")})
	ok(t, "update webhook", uw.HTTPResponse, uw.Body, err)
	rw, err := server.RotateWebhookSecretWithResponse(ctx, cw.JSON201.Id)
	ok(t, "rotate", rw.HTTPResponse, rw.Body, err)
	dw, err := server.DeleteWebhookWithResponse(ctx, cw.JSON201.Id)
	ok(t, "delete webhook", dw.HTTPResponse, dw.Body, err)

	// Operations (server tokens).
	dl, err := server.ListDeadLettersWithResponse(ctx, "fanout", nil)
	ok(t, "dead letters", dl.HTTPResponse, dl.Body, err)
	for what, want := range map[string]int{"get": 404, "drop": 404, "replay": 404} {
		var resp *http.Response
		switch what {
		case "get":
			r, _ := server.GetDeadLetterWithResponse(ctx, "fanout", "none")
			resp = r.HTTPResponse
		case "drop":
			r, _ := server.DropDeadLetterWithResponse(ctx, "fanout", "none")
			resp = r.HTTPResponse
		case "replay":
			r, _ := server.ReplayDeadLetterWithResponse(ctx, "fanout", "none")
			resp = r.HTTPResponse
		}
		if resp.StatusCode != want {
			t.Fatalf("%s of an unknown dead letter = %d", what, resp.StatusCode)
		}
	}
	now := time.Now().UTC()
	rp, err := server.RepairStreaksWithResponse(ctx, api.RepairStreaksJSONRequestBody{From: now.Add(-time.Hour), To: now})
	ok(t, "repair streaks", rp.HTTPResponse, rp.Body, err)
	bk, err := server.CreateBackupWithResponse(ctx, api.CreateBackupJSONRequestBody{Name: ptr("sdk")})
	ok(t, "backup", bk.HTTPResponse, bk.Body, err)
	kinds := map[string]int{}
	for rec, err := range ann.Export(ctx, "ann") {
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		kinds[rec.Kind]++
	}
	if kinds["profile"] != 1 || kinds["post"] != 8 { // 9 made, 1 deleted
		t.Fatalf("ann's export: %v", kinds)
	}
	// A server token acts for a user.
	own, err := server.CreatePostWithResponse(rookery.ActingAs(ctx, "bob"), nil, api.PostInput{Text: "by the app for bob"})
	ok(t, "post for bob", own.HTTPResponse, own.Body, err)
	if own.JSON201.Author.Id != "bob" {
		t.Fatalf("the post is %s's", own.JSON201.Author.Id)
	}
}

// TestRetries: reads over the rate limit are answered 429 and sent again after their Retry-After,
// so the caller sees only successes; with retries off it sees the typed error.
func TestRetries(t *testing.T) {
	base := serve(t, "--rate-read", "2/2s")
	ctx := context.Background()
	srvTok, _ := rookery.MintServerToken(secret, "app", time.Hour)
	server := client(t, base, srvTok)
	r, err := server.PutUserWithResponse(ctx, "cy", api.UserInput{Username: "cy_sdk"})
	ok(t, "put user", r.HTTPResponse, r.Body, err)
	cy := client(t, base, token(t, "cy"))
	start := time.Now()
	for i := range 4 {
		g, err := cy.GetUserWithResponse(ctx, "cy")
		ok(t, fmt.Sprintf("read %d", i+1), g.HTTPResponse, g.Body, err)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("4 reads at 2 per 2 s took %v: nothing was retried", took)
	}
	noRetry := client(t, base, token(t, "cy"), rookery.WithRetries(0, 0))
	var last error
	for range 4 {
		g, err := noRetry.GetUserWithResponse(ctx, "cy")
		last = rookery.Check(g.HTTPResponse, g.Body, err)
	}
	var e *rookery.Error
	if !errors.As(last, &e) || e.Code != "rate_limited" || e.RetryAfter <= 0 {
		t.Fatalf("over the limit without retries: %v", last)
	}
}

// TestRetriesARequestStillRunning: a create that got no answer is sent again with its key; if the
// first attempt still runs, the server answers 409 with Retry-After (a Conflict that ends by
// itself), and the SDK waits and sends it again, with the same key, until it gets the result. A
// 409 without Retry-After (the key used with another body) is the caller's. The server's side is
// tested in the server's module (app's TestIdempotencyKeyInFlight): its window is too short to hit
// from here, so this server stands in for it.
func TestRetriesARequestStillRunning(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/problem+json")
		switch {
		case r.URL.Path == "/v1/posts" && n == 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(409)
			io.WriteString(w, `{"type":"urn:rookery:problem:conflict","title":"Conflict","status":409,"detail":"a request with this Idempotency-Key is being processed; retry","code":"conflict"}`)
		case r.URL.Path == "/v1/posts":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"01KBQ0000000000000000000P1","author":{"id":"ann","username":"ann","display_name":""},"text":"once","tags":[],"mentions":[],"media":[],"visibility":"public","created_at":"2026-12-05T10:00:00.000Z","edited_at":null,"like_count":0,"comment_count":0,"liked_by_me":false}`)
		default:
			w.WriteHeader(409)
			io.WriteString(w, `{"type":"urn:rookery:problem:conflict","title":"Conflict","status":409,"detail":"this Idempotency-Key was used with a different request body","code":"conflict"}`)
		}
	}))
	defer srv.Close()
	c := client(t, srv.URL, "tok")
	p, err := c.CreatePostWithResponse(context.Background(), nil, api.PostInput{Text: "once"})
	ok(t, "create while the first attempt runs", p.HTTPResponse, p.Body, err)
	sent := func() []string { mu.Lock(); defer mu.Unlock(); return keys }
	if k := sent(); len(k) != 2 || k[0] == "" || k[0] != k[1] {
		t.Fatalf("attempts with keys %q; want two with the same key", k)
	}
	cm, err := c.AddCommentWithResponse(context.Background(), "01KBQ0000000000000000000P1", nil, api.CommentInput{Text: "x"})
	var e *rookery.Error
	if err = rookery.Check(cm.HTTPResponse, cm.Body, err); !errors.As(err, &e) || e.Status != 409 || len(sent()) != 3 {
		t.Fatalf("a 409 without Retry-After: %v after %d attempts; want it returned at once", err, len(sent())-2)
	}
}

// TestExportOutlastsTheTimeout: an export read more slowly than the HTTP client's timeout (the
// caller stores each record somewhere) still ends with every record, since the timeout bounds each
// wait for the server and not the whole export; a server that stops sending fails it after the
// timeout, saying so.
func TestExportOutlastsTheTimeout(t *testing.T) {
	base := serve(t, "--rate-write", "off")
	ctx := context.Background()
	ann := client(t, base, token(t, "ann"), rookery.WithHTTPClient(&http.Client{Timeout: time.Second}))
	r, err := ann.PutUserWithResponse(ctx, "ann", api.UserInput{Username: "ann_export"})
	ok(t, "put user", r.HTTPResponse, r.Body, err)
	const posts = 200 // ~1 MB of export: more than the client reads ahead
	text := strings.Repeat("long enough to fill the connection's buffers ", 100)
	for i := range posts {
		p, err := ann.CreatePostWithResponse(ctx, nil, api.PostInput{Text: fmt.Sprintf("%d %s", i, text)})
		ok(t, "post", p.HTTPResponse, p.Body, err)
	}
	start, got := time.Now(), 0
	for rec, err := range ann.Export(ctx, "ann") {
		if err != nil {
			t.Fatalf("export after %d posts and %v: %v", got, time.Since(start).Round(time.Millisecond), err)
		}
		if rec.Kind == "post" {
			got++
			if got == 1 {
				time.Sleep(1500 * time.Millisecond) // the caller's work, longer than the timeout
			}
		}
	}
	if got != posts {
		t.Fatalf("the export had %d posts; want %d", got, posts)
	}

	// A server that sends a record and then nothing.
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"kind":"profile","data":{}}`+"\n")
		w.(http.Flusher).Flush()
		<-stall
	}))
	defer srv.Close()
	defer close(stall)
	c := client(t, srv.URL, "tok", rookery.WithHTTPClient(&http.Client{Timeout: 500 * time.Millisecond}))
	var last error
	n := 0
	for _, err := range c.Export(ctx, "ann") {
		if last = err; err == nil {
			n++
		}
	}
	if n != 1 || last == nil || !strings.Contains(last.Error(), "stalled") {
		t.Fatalf("a stalled export: %d records, then %v; want 1, then a stall", n, last)
	}
}

// TestStreamResumes reads the live stream while its connections are cut: the iterator reconnects
// with Last-Event-ID and yields every feed.post once, in order.
func TestStreamResumes(t *testing.T) {
	base := serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follower(t, ctx, base, "eve", "dee")

	// eve's stream, over connections the test can cut.
	var mu sync.Mutex
	var conns []net.Conn
	dial := (&net.Dialer{}).DialContext
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	streamer := client(t, base, token(t, "eve"), rookery.WithHTTPClient(&http.Client{Transport: tr}))
	got := feedPosts(t, ctx, streamer)
	dee := client(t, base, token(t, "dee"))
	var want []string
	post := func() {
		p, err := dee.CreatePostWithResponse(ctx, nil, api.PostInput{Text: fmt.Sprintf("post %d", len(want))})
		ok(t, "post", p.HTTPResponse, p.Body, err)
		want = append(want, p.JSON201.Id)
	}
	time.Sleep(300 * time.Millisecond) // the stream is open
	for round := range 3 {
		post()
		post()
		select {
		case id := <-got:
			if id != want[2*round] {
				t.Fatalf("round %d: got %s first; want %s", round, id, want[2*round])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: no feed.post", round)
		}
		// Cut every connection: the second post's event, if not read yet, comes after the resume.
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		select {
		case id := <-got:
			if id != want[2*round+1] {
				t.Fatalf("round %d: got %s second; want %s", round, id, want[2*round+1])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the second feed.post never came after the connection was cut", round)
		}
	}
	select {
	case id := <-got:
		t.Fatalf("an event twice, or one too many: %s", id)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestStreamDropsADeadConnection: a connection that goes silent without closing (a network that
// dropped it, a NAT that forgot it) is taken for dead once it brings nothing, not even a
// heartbeat, for the stream timeout, and the stream resumes on a new one without losing an event;
// a quiet stream whose heartbeats come keeps its connection.
func TestStreamDropsADeadConnection(t *testing.T) {
	base := serve(t, "--stream-heartbeat", "250ms")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follower(t, ctx, base, "gus", "fay")

	var mu sync.Mutex
	var conns []*silenceable
	dial := (&net.Dialer{}).DialContext
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s := &silenceable{Conn: c, closed: make(chan struct{})}
		mu.Lock()
		conns = append(conns, s)
		mu.Unlock()
		return s, nil
	}}
	dials := func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
	streamer := client(t, base, token(t, "gus"), rookery.WithHTTPClient(&http.Client{Transport: tr}),
		rookery.WithStreamTimeout(time.Second))
	got := feedPosts(t, ctx, streamer)
	fay := client(t, base, token(t, "fay"))
	post := func() string {
		p, err := fay.CreatePostWithResponse(ctx, nil, api.PostInput{Text: "and now"})
		ok(t, "post", p.HTTPResponse, p.Body, err)
		return p.JSON201.Id
	}
	expect := func(what, id string) {
		t.Helper()
		select {
		case g := <-got:
			if g != id {
				t.Fatalf("%s: got %s; want %s", what, g, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no feed.post", what)
		}
	}
	eventually(t, "the stream connects", func() bool { return dials() > 0 })
	time.Sleep(2500 * time.Millisecond) // quiet, but for heartbeats: longer than the timeout
	if n := dials(); n != 1 {
		t.Fatalf("a quiet stream with heartbeats connected %d times; want once", n)
	}
	expect("before the silence", post())
	mu.Lock()
	for _, c := range conns {
		c.silence()
	}
	mu.Unlock()
	expect("after the connection went silent", post())
	if n := dials(); n < 2 {
		t.Fatalf("the event came over %d connection(s)", n)
	}
	select {
	case id := <-got:
		t.Fatalf("an event twice, or one too many: %s", id)
	case <-time.After(500 * time.Millisecond):
	}
}

// silenceable is a connection that can be made to go silent without closing: from then on it
// brings nothing (what arrives is dropped) until it is closed.
type silenceable struct {
	net.Conn
	quiet     atomic.Bool
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *silenceable) silence() { s.quiet.Store(true) }

func (s *silenceable) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if s.quiet.Load() {
		<-s.closed
		return 0, net.ErrClosed
	}
	return n, err
}

func (s *silenceable) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.Conn.Close()
}

// follower makes users reader and author, reader following author.
func follower(t *testing.T, ctx context.Context, base, reader, author string) {
	t.Helper()
	srvTok, _ := rookery.MintServerToken(secret, "app", time.Hour)
	server := client(t, base, srvTok)
	for _, u := range []string{author, reader} {
		r, err := server.PutUserWithResponse(ctx, u, api.UserInput{Username: u + "_sdk"})
		ok(t, "put user", r.HTTPResponse, r.Body, err)
	}
	f, err := client(t, base, token(t, reader)).FollowUserWithResponse(ctx, reader, author)
	ok(t, "follow", f.HTTPResponse, f.Body, err)
}

// feedPosts reads c's stream until ctx ends, and sends the id of each feed.post it brings.
func feedPosts(t *testing.T, ctx context.Context, c *rookery.Client) <-chan string {
	got := make(chan string, 100)
	go func() {
		for ev, err := range c.Stream(ctx, "") {
			if err != nil {
				t.Errorf("stream: %v", err)
				return
			}
			if ev.Type == "feed.post" {
				var fp api.FeedPostEvent
				if err := ev.Decode(&fp); err != nil {
					t.Errorf("feed.post %s: %v", ev.Data, err)
					return
				}
				got <- fp.Post.Id
			}
		}
	}()
	return got
}
