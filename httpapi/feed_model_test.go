package httpapi_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rookery/rookery/internal/model"
	"pgregory.net/rapid"
)

// The model-based test of the home feed. Random sequences of register, follow, unfollow,
// block, unblock, mute, unmute, post, edit visibility, delete, losing a stored timeline, and reads run
// against the real service through HTTP, with a celebrity threshold of 2 (authors cross it both ways)
// and timelines capped at 4 (reads page past the cap). A reference model computes every feed from
// first principles. At any moment a read shows nothing the model forbids, in order, each post once;
// after the pipeline drains, every user's whole feed, paged to the end, is exactly the model's.
//
// It runs on each configuration: table timelines (Pebble; DynamoDB Local when ROOKERY_TEST_STORE is
// dynamo) and Redis timelines. rapid shrinks a failing sequence; the shrunk sequence is saved under
// testdata/feedmodel/ and TestFeedRegressions replays every saved sequence on every run.

const (
	modelUsers = 5
	modelCap   = 4
)

// feedAction is one step of a sequence. Users are indexes into the sequence's users, posts indexes
// into the posts it made, so a saved sequence replays on a fresh service.
type feedAction struct {
	Op    string `json:"op"`
	A     int    `json:"a"`
	B     int    `json:"b,omitempty"`
	Post  int    `json:"post,omitempty"`
	Vis   string `json:"vis,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

var feedOps = []string{"follow", "follow", "follow", "unfollow", "block", "unblock", "mute", "unmute",
	"post", "post", "post", "post", "visibility", "delete", "lose", "read", "read", "deleteuser"}

// maxDeletedUsers is how many of a sequence's users it may delete (DELETE /v1/users/{id}); a
// "deleteuser" past it reads instead.
const maxDeletedUsers = 2

// feedModel is the reference (internal/model, which the fault test uses too) with the sequence's
// users by index: actions name users and posts by index, so a saved sequence replays anywhere.
type feedModel struct {
	*model.Model
	users []string
}

func newFeedModel(prefix string) *feedModel {
	m := &feedModel{Model: model.New()}
	for i := range modelUsers {
		m.users = append(m.users, fmt.Sprintf("%su%d", prefix, i))
		m.AddUser(m.users[i])
	}
	return m
}

// feed is user u's whole feed by the model: ids newest first by (created_at, id).
func (m *feedModel) feed(u int) []string { return m.Feed(m.users[u]) }

// modelRun drives one sequence against a fixture.
type modelRun struct {
	t   tb
	f   *fixture
	m   *feedModel
	log []feedAction
}

func (r *modelRun) tok(u int) string { return token(r.t, r.m.users[u], false) }

func (r *modelRun) register() {
	server := token(r.t, "app", true)
	for _, u := range r.m.users {
		r.f.want(r.f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
}

// apply runs one action through HTTP and on the model, and checks the reply.
func (r *modelRun) apply(act feedAction) {
	r.t.Helper()
	r.log = append(r.log, act)
	m, f := r.m, r.f
	a, b := act.A, act.B
	rel := func(kind string) string { return "/v1/users/" + m.users[a] + "/" + kind + "/" + m.users[b] }
	gone := func(u int) bool { return m.Gone(m.users[u]) }
	usesA := act.Op != "visibility" && act.Op != "delete" && act.Op != "deleteuser" // those name a post, or do not act
	usesB := slices.Contains([]string{"follow", "unfollow", "block", "unblock", "mute", "unmute"}, act.Op)
	if usesA && gone(a) || usesB && gone(b) {
		// A deleted user can neither act nor be followed; what else involves them changes nothing.
		switch act.Op {
		case "follow":
			f.want(f.do("PUT", rel("following"), r.tok(a), ""), 404, "not_found")
		case "post":
			f.want(f.do("POST", "/v1/posts", r.tok(a), `{"text":"post"}`), 404, "not_found")
		}
		return
	}
	switch act.Op {
	case "deleteuser":
		if deleted := len(slices.DeleteFunc(slices.Clone(m.users), func(u string) bool { return !m.Gone(u) })); deleted >= maxDeletedUsers && !gone(a) {
			r.checkPage(a, 5)
			return
		}
		f.want(f.do("DELETE", "/v1/users/"+m.users[a], r.tok(a), ""), 204, "") // again: a success that changes nothing
		m.DeleteUser(m.users[a])
	case "follow":
		if !m.CanFollow(m.users[a], m.users[b]) {
			f.want(f.do("PUT", rel("following"), r.tok(a), ""), 403, "forbidden")
			return
		}
		f.want(f.do("PUT", rel("following"), r.tok(a), ""), 200, "")
		m.Follow(m.users[a], m.users[b])
	case "unfollow":
		f.want(f.do("DELETE", rel("following"), r.tok(a), ""), 204, "")
		m.Unfollow(m.users[a], m.users[b])
	case "block":
		f.want(f.do("PUT", rel("blocks"), r.tok(a), ""), 204, "")
		m.Block(m.users[a], m.users[b])
	case "unblock":
		f.want(f.do("DELETE", rel("blocks"), r.tok(a), ""), 204, "")
		m.Unblock(m.users[a], m.users[b])
	case "mute":
		f.want(f.do("PUT", rel("mutes"), r.tok(a), ""), 204, "")
		m.Mute(m.users[a], m.users[b])
	case "unmute":
		f.want(f.do("DELETE", rel("mutes"), r.tok(a), ""), 204, "")
		m.Unmute(m.users[a], m.users[b])
	case "post":
		resp := f.do("POST", "/v1/posts", r.tok(a), `{"text":"post","visibility":"`+act.Vis+`"}`)
		f.want(resp, 201, "")
		m.CreatePost(resp.body["id"].(string), m.users[a], "post", act.Vis == "followers", resp.body["created_at"].(string))
	case "visibility", "delete":
		p := m.Posts()[act.Post]
		tok := token(r.t, p.Author, false)
		switch {
		case p.Deleted && act.Op == "delete":
			f.want(f.do("DELETE", "/v1/posts/"+p.ID, tok, ""), 404, "not_found")
		case p.Deleted:
			f.want(f.do("PATCH", "/v1/posts/"+p.ID, tok, `{"visibility":"`+act.Vis+`"}`), 404, "not_found")
		case act.Op == "delete":
			f.want(f.do("DELETE", "/v1/posts/"+p.ID, tok, ""), 204, "")
			m.Delete(p.ID)
		default:
			f.want(f.do("PATCH", "/v1/posts/"+p.ID, tok, `{"visibility":"`+act.Vis+`"}`), 200, "")
			p.Followers = act.Vis == "followers"
		}
	case "lose":
		f.loseTimeline(m.users[a])
	case "read":
		r.checkPage(a, act.Limit)
	default:
		r.t.Fatalf("unknown action %q", act.Op)
	}
}

// checkPage reads the first page of u's feed: every post on it is allowed now, in order, once.
func (r *modelRun) checkPage(u, limit int) {
	r.t.Helper()
	got := r.page(u, "", limit)
	allowed := r.m.feed(u)
	for i, id := range got.ids {
		if !slices.Contains(allowed, id) {
			r.t.Fatalf("%s's feed shows %s, which the model forbids (feed %v; model %v)", r.m.users[u], id, got.ids, allowed)
		}
		if i > 0 && slices.Index(allowed, got.ids[i-1]) >= slices.Index(allowed, id) {
			r.t.Fatalf("%s's feed is out of order or repeats: %v (model %v)", r.m.users[u], got.ids, allowed)
		}
	}
}

type feedPage struct {
	ids  []string
	next string
}

func (r *modelRun) page(u int, cursor string, limit int) feedPage {
	r.t.Helper()
	resp := r.f.do("GET", fmt.Sprintf("/v1/feed?limit=%d&cursor=%s", limit, cursor), r.tok(u), "")
	r.f.want(resp, 200, "")
	var p feedPage
	for _, it := range resp.body["items"].([]any) {
		p.ids = append(p.ids, it.(map[string]any)["id"].(string))
	}
	if n, ok := resp.body["next_cursor"].(string); ok {
		p.next = n
	}
	if len(p.ids) > limit {
		r.t.Fatalf("a page of %d posts; limit %d", len(p.ids), limit)
	}
	return p
}

// checkAll waits for the pipeline to drain, then pages every user's whole feed (pages of 3) and
// compares it with the model's, and every user's counters; a deleted user is gone.
func (r *modelRun) checkAll() {
	r.t.Helper()
	r.f.drain()
	r.checkFeeds()
	r.checkUsers()
}

// checkUsers compares every user's follower, following and post counts with the model's, and
// checks that a deleted user, their username and their lists are gone.
func (r *modelRun) checkUsers() {
	r.t.Helper()
	tok := token(r.t, "app", true)
	for _, u := range r.m.users {
		if r.m.Gone(u) {
			for _, path := range []string{"/v1/users/" + u, "/v1/usernames/" + u, "/v1/users/" + u + "/followers", "/v1/users/" + u + "/following", "/v1/users/" + u + "/export"} {
				r.f.want(r.f.do("GET", path, tok, ""), 404, "not_found")
			}
			continue
		}
		resp := r.f.do("GET", "/v1/users/"+u, tok, "")
		r.f.want(resp, 200, "")
		got := fmt.Sprintf("followers=%v following=%v posts=%v", resp.body["follower_count"], resp.body["following_count"], resp.body["post_count"])
		if want := fmt.Sprintf("followers=%d following=%d posts=%d", len(r.m.Followers(u)), len(r.m.Following(u)), r.m.PostCount(u)); got != want {
			r.t.Fatalf("after the pipeline drained, %s's counters are %s; the model's %s", u, got, want)
		}
		export := r.f.do("GET", "/v1/users/"+u+"/export", tok, "")
		r.f.want(export, 200, "")
		if got, err := model.ExportOf(export.raw); err != nil {
			r.t.Fatalf("%s's export: %v", u, err)
		} else if diff := cmp.Diff(r.m.Export(u), got); diff != "" {
			r.t.Fatalf("after the pipeline drained, %s's export differs from the model's (-model +export):\n%s", u, diff)
		}
	}
}

// checkFeeds pages every user's whole feed and compares it with the model's.
func (r *modelRun) checkFeeds() {
	r.t.Helper()
	for u := range r.m.users {
		if r.m.Gone(r.m.users[u]) {
			continue // checkUsers
		}
		var got []string
		cursor := ""
		for range 200 {
			p := r.page(u, cursor, 3)
			got = append(got, p.ids...)
			if p.next == "" {
				break
			}
			cursor = p.next
		}
		if want := r.m.feed(u); !slices.Equal(got, want) {
			r.t.Fatalf("after the pipeline drained, %s's feed is %v; the model's is %v", r.m.users[u], got, want)
		}
	}
}

var modelSeq atomic.Int64

func modelPrefix() string {
	return fmt.Sprintf("m%dx%d", time.Now().UnixMilli()%100000, modelSeq.Add(1))
}

// feedConfigs are the configurations the model test runs on.
var feedConfigs = map[string]fixtureConfig{
	"store": {celebrityThreshold: 2, timelineCap: modelCap}, // on DynamoDB, the same as "table"
	"table": {timelines: "table", celebrityThreshold: 2, timelineCap: modelCap},
	"redis": {timelines: "redis", celebrityThreshold: 2, timelineCap: modelCap},
}

func TestFeedModel(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" && os.Getenv("ROOKERY_TEST_STORE") == "dynamo" {
		f.Value.Set("25") // DynamoDB Local is slower; the Pebble run covers more sequences
	}
	for name, cfg := range feedConfigs {
		if name == "store" && os.Getenv("ROOKERY_TEST_STORE") == "dynamo" {
			continue // on DynamoDB the timelines in the store are table items: the "table" configuration
		}
		t.Run(name, func(t *testing.T) {
			f, _ := newFixtureWith(t, cfg)
			rapid.Check(t, func(rt *rapid.T) {
				fr := *f
				fr.t = rt // failures go to rapid, which shrinks
				run := &modelRun{t: rt, f: &fr, m: newFeedModel(modelPrefix())}
				defer func() {
					// rapid fails a run by panicking; its last failing run is the shrunk one.
					if p := recover(); p != nil {
						saveSequence(t, name, run.log)
						panic(p)
					}
				}()
				run.register()
				steps := rapid.IntRange(1, 40).Draw(rt, "steps")
				for range steps {
					act := feedAction{Op: rapid.SampledFrom(feedOps).Draw(rt, "op"), A: rapid.IntRange(0, modelUsers-1).Draw(rt, "a")}
					switch act.Op {
					case "follow", "unfollow", "block", "unblock", "mute", "unmute":
						act.B = rapid.IntRange(0, modelUsers-1).Filter(func(b int) bool { return b != act.A }).Draw(rt, "b")
					case "post":
						act.Vis = rapid.SampledFrom([]string{"public", "public", "followers"}).Draw(rt, "vis")
					case "visibility", "delete":
						if len(run.m.Posts()) == 0 {
							continue
						}
						act.Post = rapid.IntRange(0, len(run.m.Posts())-1).Draw(rt, "post")
						act.Vis = rapid.SampledFrom([]string{"public", "followers"}).Draw(rt, "vis")
					case "read":
						act.Limit = rapid.IntRange(1, 6).Draw(rt, "limit")
					}
					run.apply(act)
				}
				run.checkAll()
			})
		})
	}
}

// saveSequence writes a failing sequence where TestFeedRegressions finds it (rename the file to keep
// it as a regression case).
func saveSequence(t *testing.T, config string, log []feedAction) {
	dir := filepath.Join("testdata", "feedmodel")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	b, _ := json.MarshalIndent(log, "", "  ")
	path := filepath.Join(dir, config+"-latest-failure.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Error(err)
	}
}

// TestFeedRegressions replays every saved sequence on every configuration, then checks every feed.
func TestFeedRegressions(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "feedmodel", "*.json"))
	if len(files) == 0 {
		t.Fatal("no saved sequences in testdata/feedmodel")
	}
	for name, cfg := range feedConfigs {
		if name == "store" && os.Getenv("ROOKERY_TEST_STORE") == "dynamo" {
			continue // on DynamoDB the timelines in the store are table items: the "table" configuration
		}
		t.Run(name, func(t *testing.T) {
			f, _ := newFixtureWith(t, cfg)
			for _, file := range files {
				t.Run(filepath.Base(file), func(t *testing.T) {
					b, err := os.ReadFile(file)
					if err != nil {
						t.Fatal(err)
					}
					var log []feedAction
					if err := json.Unmarshal(b, &log); err != nil {
						t.Fatal(err)
					}
					run := &modelRun{t: t, f: f, m: newFeedModel(modelPrefix())}
					run.register()
					for _, act := range log {
						run.apply(act)
					}
					run.checkAll()
				})
			}
		})
	}
}
