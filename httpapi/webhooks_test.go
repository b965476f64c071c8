package httpapi_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery/webhook"
)

// delivery is one request a receiver got.
type delivery struct {
	id, ts, sig string
	typ         string
	body        []byte
	at          time.Time
	status      int
}

// receiver is an app's backend: it records every delivery, checks its signature with the secrets
// it knows, and answers as answer says (200 when answer is nil).
type receiver struct {
	t   testing.TB
	srv *httptest.Server

	mu      sync.Mutex
	secrets []string
	got     []delivery
	answer  func(d delivery, attempt int) (status int, delay time.Duration, header map[string]string)
	bad     []string // deliveries whose signature did not verify
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg struct{ Type string }
		json.Unmarshal(body, &msg)
		d := delivery{id: req.Header.Get("webhook-id"), ts: req.Header.Get("webhook-timestamp"),
			sig: req.Header.Get("webhook-signature"), typ: msg.Type, body: body, at: time.Now()}
		r.mu.Lock()
		verified := false
		for _, s := range r.secrets {
			if webhook.Verify(s, d.id, d.ts, d.sig, body, time.Now()) == nil {
				verified = true
			}
		}
		if !verified || req.Method != "POST" || req.Header.Get("Content-Type") != "application/json" {
			r.bad = append(r.bad, d.id+" "+d.typ)
		}
		attempt := 1
		for _, g := range r.got {
			if g.id == d.id {
				attempt++
			}
		}
		status, delay, header := 200, time.Duration(0), map[string]string(nil)
		if r.answer != nil {
			status, delay, header = r.answer(d, attempt)
		}
		d.status = status
		if delay >= 500*time.Millisecond {
			d.status = 0 // the sender gave up waiting (the fixture's timeout)
		}
		r.got = append(r.got, d)
		r.mu.Unlock()
		time.Sleep(delay)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setAnswer(f func(d delivery, attempt int) (int, time.Duration, map[string]string)) {
	r.mu.Lock()
	r.answer = f
	r.mu.Unlock()
}

// accepted returns the deliveries answered 2xx, de-duplicated by webhook-id, by type.
func (r *receiver) accepted() map[string][]delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	out := map[string][]delivery{}
	for _, d := range r.got {
		if d.status/100 == 2 && !seen[d.id] {
			seen[d.id] = true
			out[d.typ] = append(out[d.typ], d)
		}
	}
	return out
}

// waitFor waits up to 10 s until cond holds of the accepted deliveries.
func (r *receiver) waitFor(what string, cond func(map[string][]delivery) bool) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(r.accepted()) {
		if time.Now().After(deadline) {
			r.mu.Lock()
			var got []string
			for _, d := range r.got {
				got = append(got, d.typ+" "+d.id)
			}
			r.mu.Unlock()
			r.t.Fatalf("waiting for %s; the receiver got %v", what, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// register registers r as an endpoint for types and returns its id.
func (f *fixture) registerWebhook(r *receiver, types ...string) string {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"url": r.srv.URL + "/hook", "events": types})
	reply := f.do("POST", "/v1/webhooks", token(f.t, "app", true), string(b))
	f.want(reply, 201, "")
	secret, _ := reply.body["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		f.t.Fatalf("a new endpoint's secret: %s", reply.raw)
	}
	r.mu.Lock()
	r.secrets = append(r.secrets, secret)
	r.mu.Unlock()
	return reply.body["id"].(string)
}

// The endpoints API: server tokens only; validation; the secret shown on creation and rotation
// only; list, change, disable, delete.
func TestWebhookEndpoints(t *testing.T) {
	f, _ := newFixture(t)
	app, alice := token(t, "app", true), token(t, "alice", false)
	f.want(f.do("POST", "/v1/webhooks", alice, `{"url":"https://example.com/h","events":["post.created"]}`), 403, "forbidden")
	f.want(f.do("GET", "/v1/webhooks", alice, ""), 403, "forbidden")
	f.want(f.do("POST", "/v1/webhooks", app, `{"url":"https://example.com/h"}`), 400, "invalid")
	f.want(f.do("POST", "/v1/webhooks", app, `{"url":"https://example.com/h","events":["nope"]}`), 400, "invalid")
	f.want(f.do("POST", "/v1/webhooks", app, `{"url":"ftp://example.com/h","events":["post.created"]}`), 400, "invalid")
	f.want(f.do("POST", "/v1/webhooks", app, `{"url":"https://user:pw@example.com/h","events":["post.created"]}`), 400, "invalid")
	r := f.do("POST", "/v1/webhooks", app, `{"url":"https://example.com/h","events":["post.created","like.created"],"description":"d"}`)
	f.want(r, 201, "")
	id, secret := r.body["id"].(string), r.body["secret"].(string)
	if r.body["enabled"] != true || r.body["description"] != "d" {
		t.Fatalf("created endpoint %s", r.raw)
	}
	g := f.do("GET", "/v1/webhooks/"+id, app, "")
	f.want(g, 200, "")
	if _, shown := g.body["secret"]; shown {
		t.Fatalf("GET shows the secret: %s", g.raw)
	}
	list := f.do("GET", "/v1/webhooks", app, "")
	if items, _ := list.body["items"].([]any); len(items) != 1 || strings.Contains(list.raw, secret) {
		t.Fatalf("list %s", list.raw)
	}
	p := f.do("PATCH", "/v1/webhooks/"+id, app, `{"enabled":false,"events":["post.deleted"]}`)
	f.want(p, 200, "")
	if p.body["enabled"] != false || p.body["events"].([]any)[0] != "post.deleted" {
		t.Fatalf("patched %s", p.raw)
	}
	rot := f.do("POST", "/v1/webhooks/"+id+"/rotate", app, "")
	f.want(rot, 200, "")
	if s, _ := rot.body["secret"].(string); s == "" || s == secret {
		t.Fatalf("rotated secret %s", rot.raw)
	}
	f.want(f.do("DELETE", "/v1/webhooks/"+id, app, ""), 204, "")
	f.want(f.do("GET", "/v1/webhooks/"+id, app, ""), 404, "not_found")
	f.want(f.do("POST", "/v1/webhooks/"+id+"/test", app, ""), 404, "not_found")
	if strings.Contains(f.logs.String(), secret) {
		t.Fatal("a webhook secret is in the logs")
	}
}

// Every event type reaches an endpoint that asked for it, signed, once; an endpoint gets only the
// types it asked for; a disabled endpoint gets nothing.
func TestWebhookDeliveries(t *testing.T) {
	f, _ := newFixture(t)
	all := newReceiver(t)
	some := newReceiver(t)
	off := newReceiver(t)
	f.registerWebhook(all, "post.created", "post.updated", "post.deleted", "follow.created", "follow.deleted", "like.created",
		"like.deleted", "comment.created", "comment.deleted", "notification.created", "streak.changed", "user.created", "user.updated")
	f.registerWebhook(some, "post.created")
	offID := f.registerWebhook(off, "post.created")
	f.want(f.do("PATCH", "/v1/webhooks/"+offID, token(t, "app", true), `{"enabled":false}`), 200, "")
	f.drain()
	time.Sleep(1100 * time.Millisecond) // the webhooks consumer's copy of the endpoints is a second old at most
	alice, bob := token(t, "alice", false), token(t, "bob", false)
	f.register("alice", "bob")
	f.want(f.do("PUT", "/v1/users/alice", alice, `{"username":"alice","bio":"new"}`), 200, "")
	f.want(f.do("PUT", "/v1/users/bob/following/alice", bob, ""), 200, "")
	post := f.do("POST", "/v1/posts", alice, `{"text":"hello @bob_user"}`).body["id"].(string)
	f.drain() // a post deleted before its mention is handled notifies nobody
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/bob", bob, ""), 200, "")
	f.want(f.do("PATCH", "/v1/posts/"+post, alice, `{"text":"hello again"}`), 200, "")
	f.want(f.do("DELETE", "/v1/posts/"+post+"/likes/bob", bob, ""), 204, "")
	comment := f.do("POST", "/v1/posts/"+post+"/comments", bob, `{"text":"hi"}`).body["id"].(string)
	f.want(f.do("DELETE", "/v1/posts/"+post+"/comments/"+comment, alice, ""), 204, "")
	f.want(f.do("DELETE", "/v1/users/bob/following/alice", bob, ""), 204, "")
	f.want(f.do("DELETE", "/v1/posts/"+post, alice, ""), 204, "")
	want := map[string]int{"user.created": 2, "user.updated": 1, "follow.created": 1, "follow.deleted": 1, "post.created": 1,
		"post.updated": 1, "like.created": 1, "like.deleted": 1, "comment.created": 1, "comment.deleted": 1, "post.deleted": 1,
		// follow, mention, like, comment; a post, a like and a comment are activities
		"notification.created": 4, "streak.changed": 3}
	all.waitFor("every type", func(got map[string][]delivery) bool {
		for typ, n := range want {
			if len(got[typ]) < n {
				return false
			}
		}
		return true
	})
	f.drain()
	time.Sleep(200 * time.Millisecond)
	got := all.accepted()
	for typ, n := range want {
		if len(got[typ]) != n {
			t.Errorf("%s: %d deliveries; want %d", typ, len(got[typ]), n)
		}
	}
	all.mu.Lock()
	if len(all.bad) > 0 || len(all.got) != 19 {
		t.Errorf("%d requests (want 19, each once), %d failed their signature check: %v", len(all.got), len(all.bad), all.bad)
	}
	all.mu.Unlock()
	var created struct {
		Type, Timestamp string
		Data            struct{ Post struct{ ID, Text string } }
	}
	json.Unmarshal(got["post.created"][0].body, &created)
	if created.Data.Post.ID != post || created.Data.Post.Text != "hello @bob_user" || created.Timestamp == "" {
		t.Errorf("post.created body %s", got["post.created"][0].body)
	}
	var updated struct {
		Data struct {
			Post struct {
				ID, Text string
				EditedAt *string `json:"edited_at"`
			}
		}
	}
	json.Unmarshal(got["post.updated"][0].body, &updated)
	if updated.Data.Post.ID != post || updated.Data.Post.Text != "hello again" || updated.Data.Post.EditedAt == nil {
		t.Errorf("post.updated body %s", got["post.updated"][0].body)
	}
	for typ, fields := range map[string]string{"like.deleted": "post_author_id post_id unliked_at user_id", "comment.deleted": "at author_id comment_id post_author_id post_id"} {
		var m struct{ Data map[string]any }
		json.Unmarshal(got[typ][0].body, &m)
		if keys := slices.Sorted(maps.Keys(m.Data)); strings.Join(keys, " ") != fields || m.Data["post_id"] != post {
			t.Errorf("%s body %s; want the fields %s", typ, got[typ][0].body, fields)
		}
	}
	some.waitFor("post.created", func(got map[string][]delivery) bool { return len(got["post.created"]) == 1 })
	if len(some.accepted()) != 1 {
		t.Errorf("an endpoint of post.created only got %v", some.accepted())
	}
	if len(off.accepted()) != 0 {
		t.Error("a disabled endpoint got deliveries")
	}
}

// Timeouts, 5xx and 429 are retried (429's Retry-After honoured) with the same webhook-id; a test
// message; a rotated secret signs beside the new one.
func TestWebhookRetries(t *testing.T) {
	f, _ := newFixture(t)
	r := newReceiver(t)
	id := f.registerWebhook(r, "post.created")
	app := token(t, "app", true)
	r.setAnswer(func(d delivery, attempt int) (int, time.Duration, map[string]string) {
		switch {
		case d.typ == "webhook.test" && attempt == 1:
			return 500, 0, nil
		case d.typ == "webhook.test" && attempt == 2:
			return 200, 700 * time.Millisecond, nil // past the 500 ms timeout
		case d.typ == "webhook.test" && attempt == 3:
			return 429, 0, map[string]string{"Retry-After": "1"}
		}
		return 200, 0, nil
	})
	tr := f.do("POST", "/v1/webhooks/"+id+"/test", app, "")
	f.want(tr, 202, "")
	msg := tr.body["msg_id"].(string)
	r.waitFor("the test message", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 1 })
	r.mu.Lock()
	var attempts []delivery
	for _, d := range r.got {
		if d.id == msg {
			attempts = append(attempts, d)
		}
	}
	r.mu.Unlock()
	if len(attempts) != 4 {
		t.Fatalf("%d attempts; want 4 (500, timeout, 429, 200)", len(attempts))
	}
	if wait := attempts[3].at.Sub(attempts[2].at); wait < 950*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After: 1", wait)
	}

	// A rotation: the receiver knows both secrets while it switches; deliveries attempted after
	// the reply carry a signature by each.
	r.setAnswer(nil)
	rot := f.do("POST", "/v1/webhooks/"+id+"/rotate", app, "")
	newSecret := rot.body["secret"].(string)
	r.mu.Lock()
	old := r.secrets[0]
	r.secrets = []string{old, newSecret}
	r.mu.Unlock()
	msg = f.do("POST", "/v1/webhooks/"+id+"/test", app, "").body["msg_id"].(string)
	r.waitFor("a message after the rotation", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 2 })
	last := r.accepted()["webhook.test"][1]
	if last.id != msg || len(strings.Fields(last.sig)) != 2 {
		t.Fatalf("after a rotation: %s signed %q; want two signatures", last.id, last.sig)
	}
	for _, s := range []string{old, newSecret} {
		if err := webhook.Verify(s, last.id, last.ts, last.sig, last.body, time.Now()); err != nil {
			t.Errorf("a signature by the old or the new secret: %v", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("deliveries whose signature failed: %v", r.bad)
	}
}

// A change to an endpoint applies to every attempt made after its reply, although each dispatcher
// lists the endpoints only every 2 s: a test message asked for right after a change of URL goes to
// the new URL, and nothing goes to an endpoint disabled a moment before (what is queued for it
// waits until it is enabled again).
func TestWebhookEndpointChanges(t *testing.T) {
	f, _ := newFixture(t)
	old, moved := newReceiver(t), newReceiver(t)
	id := f.registerWebhook(old, "post.created")
	moved.secrets = old.secrets
	app := token(t, "app", true)
	f.want(f.do("POST", "/v1/webhooks/"+id+"/test", app, ""), 202, "")
	// The dispatcher lists the endpoints when a message is queued for one it does not know: its
	// list is fresh now, and read again only 2 s later.
	old.waitFor("the first test message", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 1 })

	b, _ := json.Marshal(map[string]string{"url": moved.srv.URL + "/hook"})
	f.want(f.do("PATCH", "/v1/webhooks/"+id, app, string(b)), 200, "")
	msg := f.do("POST", "/v1/webhooks/"+id+"/test", app, "").body["msg_id"].(string)
	moved.waitFor("the test message at the new URL", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 1 })
	if got := moved.accepted()["webhook.test"][0].id; got != msg {
		t.Errorf("the new URL got %s; want %s", got, msg)
	}

	f.want(f.do("PATCH", "/v1/webhooks/"+id, app, `{"enabled":false}`), 200, "")
	msg = f.do("POST", "/v1/webhooks/"+id+"/test", app, "").body["msg_id"].(string)
	time.Sleep(300 * time.Millisecond) // 15 of the fixture's polls
	moved.mu.Lock()
	n := len(moved.got)
	moved.mu.Unlock()
	if n != 1 {
		t.Errorf("a disabled endpoint got %d requests; want the 1 from before", n)
	}
	f.want(f.do("PATCH", "/v1/webhooks/"+id, app, `{"enabled":true}`), 200, "")
	moved.waitFor("the message queued while the endpoint was disabled", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 2 })
	if got := moved.accepted()["webhook.test"][1].id; got != msg {
		t.Errorf("after enabling: %s; want %s", got, msg)
	}
	for _, r := range []*receiver{old, moved} {
		r.mu.Lock()
		if len(r.bad) > 0 {
			t.Errorf("deliveries whose signature failed: %v", r.bad)
		}
		r.mu.Unlock()
	}
	if n := len(old.accepted()["webhook.test"]); n != 1 {
		t.Errorf("the old URL got %d test messages; want the 1 from before the change", n)
	}
}

// A delivery that keeps failing goes to the dead-letter queue of the webhooks group after its last
// retry; a replay delivers it, with its webhook-id. A 4xx is final at once.
func TestWebhookDeadLetters(t *testing.T) {
	f, _ := newFixture(t)
	r := newReceiver(t)
	id := f.registerWebhook(r, "post.created")
	app := token(t, "app", true)
	down := true
	r.setAnswer(func(d delivery, attempt int) (int, time.Duration, map[string]string) {
		if d.typ == "webhook.test" && down {
			return 503, 0, nil
		}
		if d.typ == "webhook.test" {
			return 200, 0, nil
		}
		return 400, 0, nil // anything else: refused for good
	})
	msg := f.do("POST", "/v1/webhooks/"+id+"/test", app, "").body["msg_id"].(string)
	var dead map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for dead == nil {
		list := f.do("GET", "/v1/admin/dlq/webhooks", app, "")
		items, _ := list.body["items"].([]any)
		if len(items) > 0 {
			dead = items[0].(map[string]any)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing in the webhooks group's dead letters: %s", list.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	tries := len(r.got)
	r.mu.Unlock()
	if tries != 4 || !strings.Contains(dead["error"].(string), "HTTP 503") {
		t.Fatalf("%d attempts (want 4: the first and 3 retries); dead letter %v", tries, dead)
	}
	r.mu.Lock()
	down = false
	r.mu.Unlock()
	ev := dead["event"].(map[string]any)
	f.want(f.do("POST", "/v1/admin/dlq/webhooks/"+ev["id"].(string)+"/replay", app, ""), 204, "")
	r.waitFor("the replayed delivery", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 1 })
	if got := r.accepted()["webhook.test"][0]; got.id != msg {
		t.Fatalf("the replay came as %s; want %s", got.id, msg)
	}

	// A 400 is not retried.
	f.register("alice")
	f.do("POST", "/v1/posts", token(t, "alice", false), `{"text":"x"}`)
	deadline = time.Now().Add(10 * time.Second)
	for {
		items, _ := f.do("GET", "/v1/admin/dlq/webhooks", app, "").body["items"].([]any)
		if len(items) == 1 && strings.Contains(items[0].(map[string]any)["error"].(string), "HTTP 400") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a delivery refused with 400 did not go to the dead letters")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.got {
		if d.typ == "post.created" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a delivery refused with 400 was tried %d times; want once", n)
	}
}

// One endpoint that answers slowly delays no other.
func TestWebhookSlowEndpoint(t *testing.T) {
	f, _ := newFixture(t)
	slow, fast := newReceiver(t), newReceiver(t)
	slow.setAnswer(func(delivery, int) (int, time.Duration, map[string]string) { return 200, 400 * time.Millisecond, nil })
	slowID := f.registerWebhook(slow, "post.created")
	fastID := f.registerWebhook(fast, "post.created")
	app := token(t, "app", true)
	start := time.Now()
	for range 20 {
		f.do("POST", "/v1/webhooks/"+slowID+"/test", app, "")
		f.do("POST", "/v1/webhooks/"+fastID+"/test", app, "")
	}
	fast.waitFor("20 test messages", func(got map[string][]delivery) bool { return len(got["webhook.test"]) == 20 })
	took := time.Since(start)
	if n := len(slow.accepted()["webhook.test"]); n >= 20 {
		t.Fatalf("the slow endpoint got all %d already", n)
	}
	// The slow one takes 20 x 400 ms / 4 at once = 2 s; the fast one must not wait for it.
	if took > 1500*time.Millisecond {
		fast.mu.Lock()
		for _, d := range fast.got {
			t.Logf("fast: %v %s", d.at.Sub(start), d.id)
		}
		fast.mu.Unlock()
		t.Fatalf("the fast endpoint got its 20 in %v, behind the slow one", took)
	}
}

// By default an endpoint must be https at a public address: plain http, loopback and private
// addresses are refused when registering, and a name that resolves to a private address is
// refused when connecting.
func TestWebhookURLPolicy(t *testing.T) {
	f, _ := newFixtureWith(t, fixtureConfig{strictWebhooks: true})
	app := token(t, "app", true)
	for _, u := range []string{"http://example.com/h", "https://127.0.0.1/h", "https://10.1.2.3/h", "https://[::1]/h",
		"https://localhost/h", "https://169.254.169.254/latest", "https://100.64.0.1/h"} {
		r := f.do("POST", "/v1/webhooks", app, `{"url":"`+u+`","events":["post.created"]}`)
		f.want(r, 400, "invalid")
	}
	f.want(f.do("POST", "/v1/webhooks", app, `{"url":"https://hooks.example.com/h","events":["post.created"]}`), 201, "")

	// Registered where allowed, refused where connecting: as a name that resolves to loopback.
	g, _ := newFixtureWith(t, fixtureConfig{refusePrivateDial: true})
	r := newReceiver(t)
	id := g.registerWebhook(r, "post.created")
	g.do("POST", "/v1/webhooks/"+id+"/test", app, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		items, _ := g.do("GET", "/v1/admin/dlq/webhooks", app, "").body["items"].([]any)
		if len(items) == 1 && strings.Contains(items[0].(map[string]any)["error"].(string), "not a public address") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a delivery to loopback was not refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) != 0 {
		t.Fatalf("the receiver on loopback got %d requests", len(r.got))
	}
}
