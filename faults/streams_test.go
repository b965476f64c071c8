package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/model"
	"github.com/rookery/rookery/internal/sse"
)

// TestStreams is the end-to-end test of live streams, through the real binary. Every user holds a
// stream while a seeded random workload (post, edit, delete, follow, unfollow, block, unblock,
// mute, unmute, like, unlike, comment, mention) runs one action at a time; after each action every
// stream must get exactly the events a reference model (internal/model) says, and nothing else,
// and the streams' order is the order of the actions. One user's second client disconnects at
// random steps and resumes with Last-Event-ID: at the end its sequence equals the never
// disconnected client's, event for event. It runs on the embedded default (one process) and in
// scale-out (two API and two worker processes over DynamoDB Local, NATS and Redis), where the API
// process holding the streams is killed at a random step and its clients resume on the other.
func TestStreams(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	seed := rand.Uint64()%1_000_000_000 + 1
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	t.Run("embedded", func(t *testing.T) {
		t.Logf("seed %d (rerun: go test ./faults -run TestStreams -faults.seed=%d)", seed, seed)
		n := startEmbedded(t, bin, t.TempDir())
		runStreams(t, seed, []*node{n}, nil)
	})
	t.Run("scale-out", func(t *testing.T) {
		t.Logf("seed %d (rerun: go test ./faults -run TestStreams -faults.seed=%d)", seed, seed)
		svc := startServices(t, dir)
		// Heartbeats every 2 s: a stream reads its log for what the NATS bus lost at its heartbeat.
		d := startDeployment(t, bin, dir, svc, fmt.Sprintf("rkstream%d", seed), 2, 2, "ROOKERY_STREAM_HEARTBEAT=2s")
		runStreams(t, seed, d.apis, d.apis[0])
	})
}

// startEmbedded starts `rookery serve` with the defaults: everything in one process and its data
// directory.
func startEmbedded(t *testing.T, bin, dir string) *node {
	addr := "127.0.0.1:" + freePort(t)
	n := &node{url: "http://" + addr, proc: &proc{name: "rookery", log: filepath.Join(dir, "rookery.log"),
		env:  []string{"ROOKERY_AUTH_SECRET=" + string(secret), "ROOKERY_LOG_LEVEL=warn", "ROOKERY_STREAM_HEARTBEAT=2s"},
		argv: []string{bin, "serve", "--addr", addr, "--data-dir", filepath.Join(dir, "data")}}}
	n.start(t)
	t.Cleanup(func() { n.stop(syscall.SIGTERM) })
	if err := n.waitReady(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, n.tail(30))
	}
	return n
}

// streamEvent is one Server-Sent Event.
type streamEvent struct{ ID, Type, Data string }

// streamClient holds one stream of a user, and opens it again after it ends, where it left off.
type streamClient struct {
	t    testing.TB
	user string
	tok  string
	node *node // where it connects
	// reconnects counts the times the server ended the stream and the client opened it again where
	// it left off, as EventSource does (a stream dropped for falling behind, say).
	reconnects int

	mu     sync.Mutex
	got    []streamEvent // every event received, in order
	unread int           // got[unread:] are not taken yet
	last   string        // the last event id
	cancel context.CancelFunc
	ended  chan struct{}
	wake   chan struct{}
}

func newStreamClient(t testing.TB, user, tok string) *streamClient {
	return &streamClient{t: t, user: user, tok: tok, wake: make(chan struct{}, 1)}
}

// open connects to n, resuming after the last event received, and returns once the stream has
// begun: its first id came (every stream begins with one, after the events it replays). Only then
// can the client resume without a gap; a client that goes away before it started "now", as
// docs/api.md says, and would rightly miss what happened meanwhile (in scale-out a first stream
// waits for the other processes to learn of it before it begins).
func (c *streamClient) open(n *node) error {
	c.node = n
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", n.url+"/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+c.tok)
	c.mu.Lock()
	if c.last != "" {
		req.Header.Set("Last-Event-ID", c.last)
	}
	c.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return fmt.Errorf("GET /v1/stream: %d", resp.StatusCode)
	}
	ended, begun := make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.cancel, c.ended = cancel, ended
	c.mu.Unlock()
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		sse.Read(resp.Body, func(e sse.Event) bool {
			c.mu.Lock()
			if e.ID != "" { // as EventSource does, an id without an event counts too
				c.last = e.ID
				if e.Type == "" {
					select {
					case <-begun:
					default:
						close(begun)
					}
				}
			}
			if e.Type != "" {
				c.got = append(c.got, streamEvent{ID: e.ID, Type: e.Type, Data: e.Data})
			}
			c.mu.Unlock()
			if e.Type != "" {
				select {
				case c.wake <- struct{}{}:
				default:
				}
			}
			return true
		})
	}()
	select {
	case <-begun:
		return nil
	case <-ended:
		return fmt.Errorf("the stream ended before it began")
	case <-time.After(15 * time.Second):
		return fmt.Errorf("the stream did not begin within 15 s")
	}
}

// close ends the stream (the client goes away).
func (c *streamClient) close() {
	c.mu.Lock()
	cancel, ended := c.cancel, c.ended
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-ended
	}
}

// isOpen reports whether the stream is still open.
func (c *streamClient) isOpen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		return false
	}
	select {
	case <-c.ended:
		return false
	default:
		return true
	}
}

// take waits until the stream has brought exactly the events want (keys, in any order), failing
// the test at an event not in want or after 30 s.
func (c *streamClient) take(step string, want []string) {
	c.t.Helper()
	left := slices.Clone(want)
	deadline := time.After(30 * time.Second)
	for len(left) > 0 {
		c.mu.Lock()
		fresh := c.got[c.unread:]
		c.unread = len(c.got)
		c.mu.Unlock()
		for _, ev := range fresh {
			k := eventKey(c.t, ev)
			i := slices.Index(left, k)
			if i < 0 {
				c.t.Fatalf("%s: %s's stream got %s (%s); still expected %v", step, c.user, k, ev.Data, left)
			}
			left = slices.Delete(left, i, i+1)
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-c.wake:
		case <-deadline:
			c.t.Fatalf("%s: %s's stream did not get %v within 30 s (it got %d events in all)", step, c.user, left, len(c.got))
		case <-time.After(100 * time.Millisecond):
			if !c.isOpen() { // the server ended it: open it again where it left off
				c.reconnects++
				if err := c.open(c.node); err != nil {
					c.t.Fatalf("%s: reopening %s's stream: %v", step, c.user, err)
				}
			}
		}
	}
}

// quiet fails the test if the stream has brought anything not taken yet.
func (c *streamClient) quiet(step string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) > c.unread {
		c.t.Fatalf("%s: %s's stream got %s, which the model does not expect", step, c.user, eventKey(c.t, c.got[c.unread]))
	}
}

// eventKey names what an event is about, as the model names its expectations.
func eventKey(t testing.TB, ev streamEvent) string {
	var d struct {
		Post         struct{ ID, Text string } `json:"post"`
		Position     string                    `json:"position"`
		PostID       string                    `json:"post_id"`
		AuthorID     string                    `json:"author_id"`
		Reason       string                    `json:"reason"`
		Notification struct {
			Type   string `json:"type"`
			Actor  struct{ ID string }
			PostID *string `json:"post_id"`
		} `json:"notification"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatalf("event %s data %q: %v", ev.Type, ev.Data, err)
	}
	switch ev.Type {
	case "feed.post":
		if d.Position == "" {
			t.Fatalf("feed.post without a position: %s", ev.Data)
		}
		return "post " + d.Post.ID
	case "feed.update":
		return "update post " + d.Post.ID + ": " + d.Post.Text
	case "feed.remove":
		if d.PostID != "" {
			return "remove post " + d.PostID
		}
		return "remove " + d.AuthorID + " " + d.Reason
	case "notification":
		post := ""
		if d.Notification.PostID != nil {
			post = " " + *d.Notification.PostID
		}
		return "notification " + d.Notification.Type + " by " + d.Notification.Actor.ID + post
	}
	return ev.Type
}

// streamWorld is the workload of TestStreams: the model, the users' tokens and streams.
type streamWorld struct {
	t       *testing.T
	rng     *rand.Rand
	m       *model.Model
	c       *client
	users   []string
	tok     map[string]string
	streams map[string]*streamClient
	flaky   *streamClient // users[0]'s second client
	steps   int
}

func runStreams(t *testing.T, seed uint64, apis []*node, victim *node) {
	w := &streamWorld{t: t, rng: rand.New(rand.NewPCG(seed, 7)), m: model.New(), c: newClient(t, apis, &faultClock{}),
		tok: map[string]string{}, streams: map[string]*streamClient{}}
	for i := range 5 {
		u := fmt.Sprintf("str%d", i)
		w.users = append(w.users, u)
		w.tok[u] = token(t, u, false)
		w.c.must("PUT", "/v1/users/"+u, w.tok[u], `{"username":"`+u+`"}`, "", 201)
		w.m.AddUser(u)
	}
	home := apis[0]
	for _, u := range w.users {
		s := newStreamClient(t, u, w.tok[u])
		if err := s.open(home); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.close)
		w.streams[u] = s
	}
	w.flaky = newStreamClient(t, w.users[0], w.tok[w.users[0]])
	if err := w.flaky.open(home); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.flaky.close)

	const steps = 120
	resumes := 0
	killAt := -1
	if victim != nil {
		killAt = steps/4 + w.rng.IntN(steps/2)
	}
	for w.steps = 0; w.steps < steps; w.steps++ {
		if w.steps == killAt {
			// The API process holding the streams dies; its clients resume on the other.
			victim.stop(syscall.SIGKILL)
			other := apis[1]
			for _, s := range append(slices.Collect(mapsValues(w.streams)), w.flaky) {
				deadline := time.Now().Add(10 * time.Second)
				for s.isOpen() && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if err := s.open(other); err != nil {
					t.Fatalf("resuming %s's stream on %s: %v", s.user, other.name, err)
				}
			}
			victim.start(t)
			if err := victim.waitReady(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			home = other
		}
		// users[0]'s second client goes away now and then, and comes back where it left off.
		if w.flaky.isOpen() && w.rng.IntN(5) == 0 {
			w.flaky.close()
		} else if !w.flaky.isOpen() && w.rng.IntN(2) == 0 {
			if err := w.flaky.open(home); err != nil {
				t.Fatal(err)
			}
			resumes++
		}
		name, want := w.step()
		for _, u := range w.users {
			w.streams[u].take(fmt.Sprintf("step %d (%s)", w.steps, name), want[u])
		}
	}
	// Nothing more comes, and the unread counts the notifications said are the ones a read says.
	time.Sleep(time.Second)
	for _, u := range w.users {
		w.streams[u].quiet("the end")
	}
	if !w.flaky.isOpen() {
		if err := w.flaky.open(home); err != nil {
			t.Fatal(err)
		}
	}
	steady := w.streams[w.users[0]]
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.flaky.mu.Lock()
		n := len(w.flaky.got)
		w.flaky.mu.Unlock()
		if n >= len(steady.got) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.flaky.mu.Lock()
	defer w.flaky.mu.Unlock()
	if len(w.flaky.got) != len(steady.got) {
		ids := func(evs []streamEvent) (out []string) {
			for _, e := range evs {
				out = append(out, e.ID+" "+e.Type)
			}
			return out
		}
		t.Fatalf("the client that disconnected got %d events; the one that did not, %d:\n%v\n%v", len(w.flaky.got), len(steady.got), ids(w.flaky.got), ids(steady.got))
	}
	for i := range steady.got {
		if w.flaky.got[i] != steady.got[i] {
			t.Fatalf("event %d: resumed client %+v; never disconnected %+v", i, w.flaky.got[i], steady.got[i])
		}
	}
	reconnects := 0
	for _, u := range w.users {
		reconnects += w.streams[u].reconnects
	}
	t.Logf("%d steps, %d events to %s; the second client resumed %d times; streams the server ended and the clients reopened: %d", steps, len(steady.got), w.users[0], resumes, reconnects)
}

func mapsValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		keys := make([]K, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			if !yield(m[k]) {
				return
			}
		}
	}
}

func (w *streamWorld) pick() string { return w.users[w.rng.IntN(len(w.users))] }

func (w *streamWorld) other(u string) string {
	for {
		if v := w.pick(); v != u {
			return v
		}
	}
}

// pickPost returns a random post, not deleted, of which ok holds; nil if there is none.
func (w *streamWorld) pickPost(ok func(*model.Post) bool) *model.Post {
	var can []*model.Post
	for _, p := range w.m.Posts() {
		if !p.Deleted && ok(p) {
			can = append(can, p)
		}
	}
	if len(can) == 0 {
		return nil
	}
	return can[w.rng.IntN(len(can))]
}

// inFeed returns the users whose feed, per the model now, holds post id.
func (w *streamWorld) inFeed(id string) []string {
	var out []string
	for _, u := range w.users {
		if slices.Contains(w.m.Feed(u), id) {
			out = append(out, u)
		}
	}
	return out
}

// step runs one random action and returns its name and the events each user's stream must get.
func (w *streamWorld) step() (string, map[string][]string) {
	want := map[string][]string{}
	add := func(u, k string) { want[u] = append(want[u], k) }
	notify := func(u, typ, actor, post string) {
		k := "notification " + typ + " by " + actor
		if post != "" {
			k += " " + post
		}
		add(u, k)
	}
	u := w.pick()
	v := w.other(u)
	pair := model.Pair{From: u, To: v}
	for {
		switch r := w.rng.IntN(100); {
		case r < 30: // post, mentioning someone now and then
			text := fmt.Sprintf("post %d", w.steps)
			if w.rng.IntN(3) == 0 {
				text += " @" + v
			}
			if !w.m.CanWrite(u, text) {
				continue
			}
			followers := w.rng.IntN(5) == 0
			body := map[string]any{"text": text}
			if followers {
				body["visibility"] = "followers"
			}
			b, _ := json.Marshal(body)
			reply := w.c.must("POST", "/v1/posts", w.tok[u], string(b), "", 201)
			id := reply.body["id"].(string)
			p := w.m.CreatePost(id, u, text, followers, reply.body["created_at"].(string))
			for _, r := range w.inFeed(id) {
				add(r, "post "+id)
			}
			add(u, "streak")
			if w.m.ToldOfMention(v, p) { // not if u blocked v, nor (a followers post) if v does not follow u
				notify(v, "mention", u, id)
			}
			return "post " + id + " by " + u, want
		case r < 35: // edit: new text (naming someone now and then), a fifth of the time a new visibility
			p := w.pickPost(func(p *model.Post) bool { return p.Author == u })
			if p == nil {
				continue
			}
			text := fmt.Sprintf("post %d, edited %d", w.steps, w.steps)
			if w.rng.IntN(2) == 0 {
				text += " @" + v
			}
			followers := p.Followers != (w.rng.IntN(5) == 0)
			body, _ := json.Marshal(map[string]string{"text": text, "visibility": map[bool]string{true: "followers", false: "public"}[followers]})
			if !w.m.CanWrite(u, text) {
				continue
			}
			w.c.must("PATCH", "/v1/posts/"+p.ID, w.tok[u], string(body), "", 200)
			before := map[string]int{}
			for _, r := range w.users {
				req, _ := w.m.Notifications(r)
				before[r] = len(req)
			}
			w.m.Edit(p.ID, text, followers)
			for _, r := range w.inFeed(p.ID) {
				add(r, "update post "+p.ID+": "+text)
			}
			for _, r := range w.users { // those it names for the first time (or, made public, tells at last)
				req, _ := w.m.Notifications(r)
				for _, n := range req[before[r]:] {
					notify(r, n.Type, n.Actor, n.Post)
				}
			}
			return "edit " + p.ID, want
		case r < 42: // delete
			p := w.pickPost(func(p *model.Post) bool { return p.Author == u })
			if p == nil {
				continue
			}
			w.c.must("DELETE", "/v1/posts/"+p.ID, w.tok[u], "", "", 204)
			w.m.Delete(p.ID)
			add(u, "remove post "+p.ID)
			for _, f := range w.m.Followers(u) {
				add(f, "remove post "+p.ID)
			}
			return "delete " + p.ID, want
		case r < 57: // follow
			if w.m.Follows[pair] || !w.m.CanFollow(u, v) {
				continue
			}
			w.c.must("PUT", "/v1/users/"+u+"/following/"+v, w.tok[u], "", "", 200)
			w.m.Follow(u, v)
			w.recentOf(add, u, v)
			notify(v, "follow", u, "")
			return u + " follows " + v, want
		case r < 65: // unfollow
			if !w.m.Follows[pair] {
				continue
			}
			w.c.must("DELETE", "/v1/users/"+u+"/following/"+v, w.tok[u], "", "", 204)
			w.m.Unfollow(u, v)
			add(u, "remove "+v+" unfollowed")
			return u + " unfollows " + v, want
		case r < 69: // block
			if w.m.Blocks[pair] {
				continue
			}
			w.c.must("PUT", "/v1/users/"+u+"/blocks/"+v, w.tok[u], "", "", 204)
			if w.m.Follows[pair] {
				add(u, "remove "+v+" unfollowed")
			}
			if w.m.Follows[model.Pair{From: v, To: u}] {
				add(v, "remove "+u+" unfollowed")
			}
			w.m.Block(u, v)
			add(u, "remove "+v+" blocked")
			add(v, "remove "+u+" blocked")
			return u + " blocks " + v, want
		case r < 72: // unblock
			if !w.m.Blocks[pair] {
				continue
			}
			w.c.must("DELETE", "/v1/users/"+u+"/blocks/"+v, w.tok[u], "", "", 204)
			w.m.Unblock(u, v)
			return u + " unblocks " + v, want
		case r < 77: // mute
			if w.m.Mutes[pair] {
				continue
			}
			w.c.must("PUT", "/v1/users/"+u+"/mutes/"+v, w.tok[u], "", "", 204)
			w.m.Mute(u, v)
			add(u, "remove "+v+" muted")
			return u + " mutes " + v, want
		case r < 81: // unmute
			if !w.m.Mutes[pair] {
				continue
			}
			w.c.must("DELETE", "/v1/users/"+u+"/mutes/"+v, w.tok[u], "", "", 204)
			w.m.Unmute(u, v)
			w.recentOf(add, u, v)
			return u + " unmutes " + v, want
		case r < 92: // like
			p := w.pickPost(func(p *model.Post) bool { return w.m.CanSee(u, p) && !p.Likes[u] })
			if p == nil {
				continue
			}
			w.c.must("PUT", "/v1/posts/"+p.ID+"/likes/"+u, w.tok[u], "", "", 200)
			w.m.Like(p.ID, u)
			add(u, "streak")
			if p.Author != u {
				notify(p.Author, "like", u, p.ID)
			}
			return u + " likes " + p.ID, want
		case r < 95: // unlike
			p := w.pickPost(func(p *model.Post) bool { return p.Likes[u] && w.m.CanSee(u, p) })
			if p == nil {
				continue
			}
			w.c.must("DELETE", "/v1/posts/"+p.ID+"/likes/"+u, w.tok[u], "", "", 200, 204)
			w.m.Unlike(p.ID, u)
			return u + " unlikes " + p.ID, want
		default: // comment
			p := w.pickPost(func(p *model.Post) bool { return w.m.CanSee(u, p) })
			if p == nil {
				continue
			}
			reply := w.c.must("POST", "/v1/posts/"+p.ID+"/comments", w.tok[u], `{"text":"nice"}`, "", 201)
			w.m.Comment(p.ID, u, reply.body["id"].(string))
			add(u, "streak")
			if p.Author != u {
				notify(p.Author, "comment", u, p.ID)
			}
			return u + " comments on " + p.ID, want
		}
	}
}

// recentOf expects a feed.post, for reader, of each of author's posts that the reader's feed now
// holds (a follow or an unmute brings the author's recent posts in).
func (w *streamWorld) recentOf(add func(u, k string), reader, author string) {
	feed := w.m.Feed(reader)
	for _, p := range w.m.AuthorPosts(author) {
		if slices.Contains(feed, p.ID) {
			add(reader, "post "+p.ID)
		}
	}
}
