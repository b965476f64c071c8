package httpapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
)

// TestFailedRebuildLosesNoPost is a loss the fault test found, step by step in one process: a reader who never
// read their feed (no timeline) follows an author whose posts p_old and p_new fan-out skips; the
// reader's first read fails half-way through the rebuild (the store fails its queries); then a
// late, retried push of p_old lands. Every post must still be in the feed. Before the fix, the
// failed rebuild left an empty timeline that was trusted, and the late push made it look complete
// above p_old, hiding p_new for good.
func TestFailedRebuildLosesNoPost(t *testing.T) {
	for _, timelines := range []string{"", "redis"} {
		t.Run(cmpOr(timelines, "store"), func(t *testing.T) {
			f, store := newFixtureWith(t, fixtureConfig{timelines: timelines})
			toks := f.register("r", "a")
			r, a := toks[0], toks[1]
			f.want(f.do("PUT", "/v1/users/r/following/a", r, ""), 200, "")
			post := func(text string) map[string]any {
				t.Helper()
				reply := f.do("POST", "/v1/posts", a, `{"text":"`+text+`"}`)
				f.want(reply, 201, "")
				time.Sleep(2 * time.Millisecond) // distinct milliseconds: p_old is older than p_new
				return reply.body
			}
			post("p1")
			pOld := post("p_old")
			post("p_new")
			f.drain()
			f.loseTimeline("r") // as Redis restarted empty: fan-out of all three skipped r

			failure := rookery.E("test", rookery.Unavailable, "the store is paused")
			store.queryErr.Store(&failure)
			if got := f.do("GET", "/v1/feed", r, ""); got.status != 503 {
				t.Fatalf("feed read while the store fails = %d %s", got.status, got.raw)
			}
			store.queryErr.Store(nil)
			// Timelines kept in the failing table itself (on DynamoDB) cannot even be read: the read
			// pulls, and no rebuild begins. Elsewhere the rebuild began and failed half-way.
			if _, inTable := f.timelines.(*tablestore.Store); !inTable {
				if !strings.Contains(f.logs.String(), "timeline rebuild failed") {
					t.Error("the failed rebuild was not logged")
				}
				if m := f.do("GET", "/metrics", "", ""); !strings.Contains(m.raw, `rookery_timeline_rebuilds_total{outcome="failed"} 1`) {
					t.Error("the failed rebuild was not counted in rookery_timeline_rebuilds_total")
				}
			}

			// The retried fan-out of p_old lands now.
			at, err := time.Parse(time.RFC3339Nano, pOld["created_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			late := timeline.Entry{PostID: pOld["id"].(string), AuthorID: "a", At: at.Truncate(time.Millisecond)}
			if err := f.timelines.Push(context.Background(), []string{"r"}, late); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the read that rebuilds, and one from the timeline it built
				if got := feedTexts(f, r, 2); got != "p_new,p_old,p1" {
					t.Fatalf("feed = %s; want p_new,p_old,p1", got)
				}
			}
			if m := f.do("GET", "/metrics", "", ""); !strings.Contains(m.raw, `rookery_timeline_rebuilds_total{outcome="complete"} 1`) {
				t.Error("the completed rebuild was not counted")
			}
		})
	}
}

// TestRebuildOutlivesTheRead: a reader's first read after their timeline was lost begins its
// rebuild while the store is slow, and the client gives up. The rebuild goes on, completes when the
// store answers, and the next read finds the timeline built. (Before, the rebuild ended with the
// read: under a store slower than the clients' patience every read began a rebuild and none
// finished, as the fault test saw after DynamoDB Local resumed.)
func TestRebuildOutlivesTheRead(t *testing.T) {
	f, store := newFixtureWith(t, fixtureConfig{timelines: "redis"})
	toks := f.register("r", "a")
	r, a := toks[0], toks[1]
	f.want(f.do("PUT", "/v1/users/r/following/a", r, ""), 200, "")
	f.want(f.do("POST", "/v1/posts", a, `{"text":"a1"}`), 201, "")
	f.drain()
	f.loseTimeline("r")

	// The rebuild's queries: r's follow list and the posts of a and r (not the outbox relay's).
	hold := newStoreHold(func(q table.Query) bool {
		return q.PK == "FOLLOWING#r" || q.PK == "USER#a" || q.PK == "USER#r"
	})
	store.queryHold.Store(hold)
	ctx, giveUp := context.WithCancel(context.Background())
	read := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/feed", nil)
		req.Header.Set("Authorization", "Bearer "+r)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		read <- err
	}()
	select {
	case <-hold.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the rebuild queried nothing")
	}
	giveUp()
	if err := <-read; err == nil {
		t.Fatal("the read answered while the store held its queries")
	}
	time.Sleep(50 * time.Millisecond) // the server sees the client go
	store.queryHold.Store(nil)
	close(hold.release)

	rebuilds := func(outcome string) string {
		return `rookery_timeline_rebuilds_total{outcome="` + outcome + `"} 1`
	}
	// The rebuild may take up to its own bound (app's rebuildTimeout, 15 s) on a loaded machine's
	// DynamoDB Local: waited for longer than that, so that only a rebuild that never completes fails.
	eventuallyWithin(t, 30*time.Second, "the rebuild completes", func() error {
		if m := f.do("GET", "/metrics", "", "").raw; !strings.Contains(m, rebuilds("complete")) {
			return errors.New("no completed rebuild counted: " + grepLines(m, "rookery_timeline_rebuilds_total"))
		}
		return nil
	})
	if got := feedTexts(f, r, 10); got != "a1" {
		t.Fatalf("feed = %s; want a1", got)
	}
	m := f.do("GET", "/metrics", "", "").raw
	if strings.Contains(m, rebuilds("failed")) || !strings.Contains(m, rebuilds("complete")) {
		t.Errorf("the rebuild failed, or the next read built the timeline again:\n%s", grepLines(m, "rookery_timeline_rebuilds_total"))
	}
}

// TestSoleWriterRebuildsFromItsCache: on the embedded store (the table's only writer) a timeline's
// rebuild takes the authors' newest posts from the process's cache of them, so it runs no query
// for an author that is cached, and still has the post whose fan-out reached only the timeline that
// was lost. Where other processes may write (DynamoDB) it queries every author.
func TestSoleWriterRebuildsFromItsCache(t *testing.T) {
	f, store := newFixtureWith(t, fixtureConfig{timelines: "redis"})
	_, sole := store.Table.(*pebble.DB)
	toks := f.register("r", "a", "b")
	r, a, b := toks[0], toks[1], toks[2]
	f.want(f.do("PUT", "/v1/users/r/following/a", r, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/r/following/b", r, ""), 200, "")
	f.want(f.do("POST", "/v1/posts", a, `{"text":"a1"}`), 201, "")
	time.Sleep(2 * time.Millisecond) // distinct milliseconds: the order is the posts'
	f.want(f.do("POST", "/v1/posts", b, `{"text":"b1"}`), 201, "")
	f.drain()
	if got := feedTexts(f, r, 10); got != "b1,a1" { // builds r's timeline, caching a, b and r
		t.Fatalf("feed = %s; want b1,a1", got)
	}
	time.Sleep(2 * time.Millisecond)
	f.want(f.do("POST", "/v1/posts", a, `{"text":"a2"}`), 201, "")
	f.drain()           // fan-out pushed a2 to r's timeline ...
	f.loseTimeline("r") // ... which is lost

	failure := rookery.E("test", rookery.Unavailable, "the store fails queries")
	store.queryErr.Store(&failure)
	got := f.do("GET", "/v1/feed", r, "")
	store.queryErr.Store(nil)
	if !sole {
		f.want(got, 503, "") // every author queried
		return
	}
	f.want(got, 200, "")
	var texts []string
	for _, it := range got.body["items"].([]any) {
		texts = append(texts, it.(map[string]any)["text"].(string))
	}
	if strings.Join(texts, ",") != "a2,b1,a1" {
		t.Fatalf("feed rebuilt from the cache = %v; want a2,b1,a1", texts)
	}
}

// register creates users (each with the username <id>_user) and returns their tokens.
func (f *fixture) register(ids ...string) []string {
	f.t.Helper()
	server := token(f.t, "app", true)
	var toks []string
	for _, u := range ids {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`_user"}`), 201, "")
		toks = append(toks, token(f.t, u, false))
	}
	return toks
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// feedTexts pages tok's feed to the end with page size limit and returns the posts' texts.
func feedTexts(f *fixture, tok string, limit int) string {
	f.t.Helper()
	var texts []string
	cursor := ""
	for range 100 {
		r := f.do("GET", fmt.Sprintf("/v1/feed?limit=%d&cursor=%s", limit, cursor), tok, "")
		f.want(r, 200, "")
		for _, it := range r.body["items"].([]any) {
			texts = append(texts, it.(map[string]any)["text"].(string))
		}
		next, ok := r.body["next_cursor"].(string)
		if !ok {
			return strings.Join(texts, ",")
		}
		cursor = next
	}
	f.t.Fatal("paging does not end")
	return ""
}

// TestFeedCursors: the feed's cursor is sealed like every list's (tampered, forged or another
// reader's: 400), and a last page that happens to be full has no next cursor.
func TestFeedCursors(t *testing.T) {
	f, _ := newFixture(t)
	toks := f.register("r", "s", "a")
	r, s, a := toks[0], toks[1], toks[2]
	f.want(f.do("PUT", "/v1/users/r/following/a", r, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/s/following/a", s, ""), 200, "")
	for i := range 4 {
		f.want(f.do("POST", "/v1/posts", a, fmt.Sprintf(`{"text":"post %d"}`, i)), 201, "")
	}
	f.drain()

	first := f.do("GET", "/v1/feed?limit=2", r, "")
	f.want(first, 200, "")
	cursor, ok := first.body["next_cursor"].(string)
	if !ok {
		t.Fatalf("first page of 4 posts by 2 has no cursor: %s", first.raw)
	}
	last := f.do("GET", "/v1/feed?limit=2&cursor="+cursor, r, "")
	f.want(last, 200, "")
	if n := len(last.body["items"].([]any)); n != 2 || last.body["next_cursor"] != nil {
		t.Fatalf("the last page, full: %d posts, next_cursor %v; want 2 and null", n, last.body["next_cursor"])
	}
	if got := feedTexts(f, r, 4); got != "post 3,post 2,post 1,post 0" {
		t.Fatalf("feed in one full page = %s", got)
	}

	raw, _ := base64.RawURLEncoding.DecodeString(cursor)
	raw[len(raw)/2] ^= 1
	bad := []string{
		base64.RawURLEncoding.EncodeToString(raw),                        // tampered
		base64.RawURLEncoding.EncodeToString([]byte("1700000000000.P1")), // the old plain form
		"forged",
	}
	for _, c := range bad {
		f.want(f.do("GET", "/v1/feed?limit=2&cursor="+c, r, ""), 400, "invalid")
	}
	f.want(f.do("GET", "/v1/feed?limit=2&cursor="+cursor, s, ""), 400, "invalid") // another reader's
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
