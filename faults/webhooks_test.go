package faults_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rookery/rookery/webhook"
)

// TestWebhooks is the end-to-end test of webhooks, through the real binary in scale-out (two API
// and two worker processes over DynamoDB Local, NATS and Redis). A real HTTP receiver verifies
// every signature with the specification's algorithm and answers some first attempts with 500 or
// too late; a seeded workload runs while a worker process is killed with deliveries under way.
// Every message the workload implies must reach the receiver exactly once after de-duplication by
// webhook-id, and nothing else. A second endpoint is dead: its deliveries end in the dead-letter
// queue of the webhooks group, and `rookery dlq replay` delivers them once it answers. On the
// default configuration, plain-http and private URLs are refused.
func TestWebhooks(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	seed := rand.Uint64()%1_000_000_000 + 1
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	t.Logf("seed %d (rerun: go test ./faults -run TestWebhooks -faults.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	t.Run("refused by default", func(t *testing.T) {
		n := startEmbedded(t, bin, t.TempDir())
		c := newClient(t, []*node{n}, &faultClock{})
		app := token(t, "app", true)
		for _, u := range []string{"http://hooks.example.com/h", "https://127.0.0.1/h", "https://192.168.1.10/h", "https://localhost:8443/h"} {
			c.must("POST", "/v1/webhooks", app, `{"url":"`+u+`","events":["post.created"]}`, "", 400)
		}
	})

	svc := startServices(t, dir)
	good := newHookReceiver(t, rng)
	dead := newHookReceiver(t, rng)
	dead.down = true
	d := startDeployment(t, bin, dir, svc, fmt.Sprintf("rkhooks%d", seed), 2, 2,
		"ROOKERY_WEBHOOKS_ALLOW_HTTP=true", "ROOKERY_WEBHOOKS_ALLOW_PRIVATE=true", "ROOKERY_WEBHOOKS_TIMEOUT=1s",
		"ROOKERY_WEBHOOKS_RETRIES=200ms,400ms,800ms,1600ms")
	c := newClient(t, d.apis, &faultClock{})
	app := token(t, "app", true)
	types := []string{"post.created", "post.updated", "post.deleted", "follow.created", "follow.deleted", "like.created",
		"like.deleted", "comment.created", "comment.deleted", "notification.created", "streak.changed", "user.created", "user.updated"}
	for _, r := range []*hookReceiver{good, dead} {
		b, _ := json.Marshal(map[string]any{"url": r.srv.URL + "/hook", "events": types})
		reply := c.must("POST", "/v1/webhooks", app, string(b), "", 201)
		r.secret = reply.body["secret"].(string)
	}
	time.Sleep(1100 * time.Millisecond) // the webhooks consumers' copy of the endpoints

	// The workload, and what it must bring: a key per message.
	var want []string
	users := []string{"hk0", "hk1", "hk2", "hk3", "hk4"}
	tok := map[string]string{}
	for _, u := range users {
		tok[u] = token(t, u, false)
		c.must("PUT", "/v1/users/"+u, tok[u], `{"username":"`+u+`"}`, "", 201)
		want = append(want, "user.created "+u)
	}
	follows := map[[2]string]bool{}
	type post struct {
		id, author string
		likes      map[string]bool
		keep       bool // never deleted
	}
	var posts []*post
	type comment struct {
		post       *post
		id, author string
	}
	var comments []comment
	// live returns a random post not deleted, or nil.
	live := func() *post {
		if len(posts) == 0 {
			return nil
		}
		if p := posts[rng.IntN(len(posts))]; p.id != "" {
			return p
		}
		return nil
	}
	killAt := 20 + rng.IntN(20)
	for step := range 60 {
		if step == killAt {
			d.workers[0].stop(syscall.SIGKILL) // with deliveries under way (the receiver answers slowly)
			go func() { time.Sleep(2 * time.Second); d.workers[0].start(t) }()
		}
		u := users[rng.IntN(len(users))]
		v := users[rng.IntN(len(users))]
		switch r := rng.IntN(10); {
		case r < 3:
			text, mentions := fmt.Sprintf("post %d", step), []string(nil)
			if step%2 == 0 { // two mentions: one event makes both notifications
				i := slices.Index(users, u)
				mentions = []string{users[(i+1)%len(users)], users[(i+2)%len(users)]}
				text += " @" + mentions[0] + " @" + mentions[1]
			}
			reply := c.must("POST", "/v1/posts", tok[u], `{"text":"`+text+`"}`, "", 201)
			// A post deleted before its mentions are handled notifies nobody: one with mentions stays.
			p := &post{id: reply.body["id"].(string), author: u, likes: map[string]bool{}, keep: mentions != nil}
			posts = append(posts, p)
			want = append(want, "post.created "+p.id, "streak.changed "+u)
			for _, m := range mentions {
				want = append(want, "notification.created mention "+m)
			}
		case r < 5 && u != v:
			e := [2]string{u, v}
			if follows[e] {
				c.must("DELETE", "/v1/users/"+u+"/following/"+v, tok[u], "", "", 204)
				delete(follows, e)
				want = append(want, "follow.deleted "+u+">"+v)
			} else {
				c.must("PUT", "/v1/users/"+u+"/following/"+v, tok[u], "", "", 200)
				follows[e] = true
				want = append(want, "follow.created "+u+">"+v, "notification.created follow "+v)
			}
		case r < 7:
			p := live()
			if p == nil {
				continue
			}
			if p.likes[u] {
				c.must("DELETE", "/v1/posts/"+p.id+"/likes/"+u, tok[u], "", "", 204)
				delete(p.likes, u)
				want = append(want, "like.deleted "+p.id+" "+u)
				continue
			}
			c.must("PUT", "/v1/posts/"+p.id+"/likes/"+u, tok[u], "", "", 200)
			p.likes[u] = true
			want = append(want, "like.created "+p.id+" "+u, "streak.changed "+u)
			if p.author != u {
				want = append(want, "notification.created like "+p.author)
			}
		case r < 8:
			p := live()
			if p == nil {
				continue
			}
			// Half the time, u deletes the oldest comment they may (theirs, or on their post) on a
			// post not deleted, if any.
			if i := slices.IndexFunc(comments, func(c comment) bool { return (c.author == u || c.post.author == u) && c.post.id != "" }); i >= 0 && rng.IntN(2) == 0 {
				cm := comments[i]
				c.must("DELETE", "/v1/posts/"+cm.post.id+"/comments/"+cm.id, tok[u], "", "", 204)
				comments = slices.Delete(comments, i, i+1)
				want = append(want, "comment.deleted "+cm.id)
				continue
			}
			reply := c.must("POST", "/v1/posts/"+p.id+"/comments", tok[u], `{"text":"c"}`, "", 201)
			comments = append(comments, comment{post: p, id: reply.body["id"].(string), author: u})
			want = append(want, "comment.created "+reply.body["id"].(string), "streak.changed "+u)
			if p.author != u {
				want = append(want, "notification.created comment "+p.author)
			}
		case r < 9 && rng.IntN(2) == 0:
			i := slices.IndexFunc(posts, func(p *post) bool { return p.id != "" && p.author == u })
			if i < 0 {
				continue
			}
			p := posts[i]
			c.must("PATCH", "/v1/posts/"+p.id, tok[u], `{"text":"edited `+fmt.Sprint(step)+`"}`, "", 200)
			want = append(want, "post.updated "+p.id)
		case r < 9:
			p := live()
			if p == nil || p.keep {
				continue
			}
			c.must("DELETE", "/v1/posts/"+p.id, tok[p.author], "", "", 204)
			want = append(want, "post.deleted "+p.id)
			p.id = ""
		default:
			c.must("PUT", "/v1/users/"+u, tok[u], `{"username":"`+u+`","bio":"step `+fmt.Sprint(step)+`"}`, "", 200)
			want = append(want, "user.updated "+u)
		}
	}
	sort.Strings(want)

	// Every message reaches the good receiver once after de-duplication, and nothing else.
	deadline := time.Now().Add(90 * time.Second)
	for len(good.keys()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // nothing more comes
	got := good.keys()
	if !slices.Equal(got, want) {
		t.Fatalf("the receiver got (de-duplicated by webhook-id):\n%v\nthe workload implies:\n%v", diffKeys(got, want), diffKeys(want, got))
	}
	good.mu.Lock()
	kinds := map[string]int{}
	for _, k := range want {
		kinds[strings.Fields(k)[0]]++
	}
	t.Logf("%d messages (%v); %d requests (500s, timeouts and redeliveries included); %d bad signatures", len(want), kinds, good.requests, len(good.bad))
	if len(good.bad) > 0 {
		t.Errorf("deliveries whose signature did not verify: %v", good.bad)
	}
	good.mu.Unlock()

	// The dead endpoint's deliveries are dead letters; a replay with the dlq tools delivers them.
	env := append(append([]string{}, d.env...), "ROOKERY_AUTH_SECRET="+string(secret))
	dlq := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"dlq", "--server", d.apis[0].url, "--group", "webhooks"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rookery dlq %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	idRe := regexp.MustCompile(`(?m)^(msg_\S+)`)
	var letters []string
	deadline = time.Now().Add(60 * time.Second)
	for {
		letters = letters[:0]
		after := ""
		for {
			args := []string{"list", "--limit", "100"}
			if after != "" {
				args = append(args, "--after", after)
			}
			out := dlq(args...)
			for _, m := range idRe.FindAllStringSubmatch(out, -1) {
				letters = append(letters, m[1])
			}
			more := regexp.MustCompile(`more: --after (\S+)`).FindStringSubmatch(out)
			if more == nil {
				break
			}
			after = more[1]
		}
		if len(letters) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(letters) != len(want) {
		t.Fatalf("%d dead letters in the webhooks group; want one per message to the dead endpoint, %d", len(letters), len(want))
	}
	dead.mu.Lock()
	dead.down = false
	dead.mu.Unlock()
	for _, id := range letters {
		dlq("replay", id)
	}
	deadline = time.Now().Add(60 * time.Second)
	for len(dead.keys()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := dead.keys(); !slices.Equal(got, want) {
		t.Fatalf("after the replay the dead endpoint got:\n%v\nwant:\n%v", diffKeys(got, want), diffKeys(want, got))
	}
}

// hookReceiver is the app's backend: it verifies each delivery's signature and answers some first
// attempts with 500 or after the sender's timeout (or, while down, every attempt with 503).
type hookReceiver struct {
	srv    *httptest.Server
	secret string

	mu       sync.Mutex
	rng      *rand.Rand
	down     bool
	requests int
	seen     map[string]int    // webhook-id -> attempts
	accepted map[string]string // webhook-id -> key, of the deliveries answered 200
	bad      []string
}

func newHookReceiver(t *testing.T, rng *rand.Rand) *hookReceiver {
	r := &hookReceiver{rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), seen: map[string]int{}, accepted: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.requests++
		if err := webhook.Verify(r.secret, id, req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body, time.Now()); err != nil {
			r.bad = append(r.bad, id+": "+err.Error())
		}
		r.seen[id]++
		first := r.seen[id] == 1
		status, delay := 200, 50*time.Millisecond
		switch x := r.rng.IntN(100); {
		case r.down:
			status = 503
		case first && x < 10:
			status = 500
		case first && x < 15:
			delay = 1500 * time.Millisecond // past the sender's 1 s timeout: it tries again
		}
		late := delay > time.Second
		if status == 200 && !late {
			r.accepted[id] = messageKey(body)
		}
		r.mu.Unlock()
		time.Sleep(delay)
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// keys returns the keys of the messages accepted, one per webhook-id, sorted.
func (r *hookReceiver) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range r.accepted {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// messageKey names a message as the workload does.
func messageKey(body []byte) string {
	var m struct {
		Type string
		Data struct {
			Post         struct{ ID string }
			PostID       string `json:"post_id"`
			UserID       string `json:"user_id"`
			FollowerID   string `json:"follower_id"`
			FolloweeID   string `json:"followee_id"`
			CommentID    string `json:"comment_id"`
			User         struct{ ID string }
			Notification struct{ Type string }
		}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "malformed " + string(body)
	}
	switch m.Type {
	case "post.created", "post.updated":
		return m.Type + " " + m.Data.Post.ID
	case "post.deleted":
		return m.Type + " " + m.Data.PostID
	case "follow.created", "follow.deleted":
		return m.Type + " " + m.Data.FollowerID + ">" + m.Data.FolloweeID
	case "like.created", "like.deleted":
		return m.Type + " " + m.Data.PostID + " " + m.Data.UserID
	case "comment.created", "comment.deleted":
		return m.Type + " " + m.Data.CommentID
	case "notification.created":
		return m.Type + " " + m.Data.Notification.Type + " " + m.Data.UserID
	case "streak.changed":
		return m.Type + " " + m.Data.UserID
	case "user.created", "user.updated":
		return m.Type + " " + m.Data.User.ID
	}
	return m.Type
}

// diffKeys returns the keys of a missing from b (counting repeats).
func diffKeys(a, b []string) []string {
	left := slices.Clone(b)
	var out []string
	for _, k := range a {
		if i := slices.Index(left, k); i >= 0 {
			left = slices.Delete(left, i, i+1)
		} else {
			out = append(out, k)
		}
	}
	return out
}
