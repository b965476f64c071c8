package httpapi_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/live"
	"github.com/rookery/rookery/webhook"

	"github.com/oklog/ulid/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/events/sqs"
	"github.com/rookery/rookery/events/sqs/sqstest"
	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/internal/awsconf"
	"github.com/rookery/rookery/metrics"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
	tlredis "github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/tablestore"
)

var secret = []byte("httpapi-test-secret-0123456789abcdef")

// tb is what the fixture's helpers need of a test: a *testing.T, or a *rapid.T in a property.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type fixture struct {
	t        tb
	srv      *httptest.Server
	store    table.Table
	logs     *syncWriter
	evlog    events.Log
	pipeline *eventstest.Pipeline
	// loseTimeline makes user's stored timeline vanish, as a Redis restart or inactivity does.
	loseTimeline func(user string)
	timelines    timeline.Store
	hub          *live.Hub
}

// fixtureConfig varies the fixture; the zero value is the default service.
type fixtureConfig struct {
	timelines          string // "" (in the store, as rookery serve: Pebble's timeline layout, or table items on DynamoDB), "table" (table items) or "redis"
	redisAddr          string // "" means internal/testenv's
	celebrityThreshold int    // 0: the default
	timelineCap        int    // 0: the default
	engagement         app.Engagement
	heartbeat          time.Duration // of streams; 0: 200 ms
	strictWebhooks     bool          // webhooks as by default: https to public addresses only (else the tests' receivers on loopback)
	refusePrivateDial  bool          // the dispatcher refuses to connect to loopback, as by default
	streamBuffer       int           // 0: the default
	deletedGrace       time.Duration // 0: the default
	holdErasure        chan struct{} // if not nil, the erasure consumer handles nothing until it is closed
}

// flakyStore fails Get and Ping with err while err is set, and Query with queryErr; while
// queryHold is set, Query waits for it to be released (or for its context to end), as a paused
// store does.
type flakyStore struct {
	table.Table
	err       atomic.Pointer[error]
	queryErr  atomic.Pointer[error]
	queryHold atomic.Pointer[storeHold]
}

// storeHold holds the store's queries that match: entered receives when one is held, release lets
// them go. It matches a test's own queries only: the outbox relay's polls (every 10 ms in the
// fixture, on either store) are not held, so entered means the test's request has reached the store.
type storeHold struct {
	match   func(table.Query) bool
	entered chan struct{} // buffered
	release chan struct{}
}

func newStoreHold(match func(table.Query) bool) *storeHold {
	return &storeHold{match: match, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (f *flakyStore) Query(ctx context.Context, q table.Query) (table.Page, error) {
	if p := f.queryErr.Load(); p != nil {
		return table.Page{}, *p
	}
	if h := f.queryHold.Load(); h != nil && h.match(q) {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done():
			return table.Page{}, ctx.Err()
		}
	}
	return f.Table.Query(ctx, q)
}

func (f *flakyStore) fail() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}
func (f *flakyStore) Get(ctx context.Context, k table.Key) (table.Item, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Table.Get(ctx, k)
}
func (f *flakyStore) Ping(ctx context.Context) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Table.Ping(ctx)
}

// The scenario tests run on the store named by ROOKERY_TEST_STORE: pebble (the default) or dynamo
// (DynamoDB Local; make test runs this package a second time so).
// With ROOKERY_TEST_EVENTS=sqs their event log is SNS/SQS (fauxqs; make test runs the package a
// third time so, on DynamoDB Local), as `rookery serve --events sqs` runs it.
func TestMain(m *testing.M) {
	run := m.Run
	if os.Getenv("ROOKERY_TEST_STORE") == "dynamo" {
		run = func() int { return dynamotest.Run(m) }
	}
	if onSQS() {
		os.Exit(sqstest.Run(run))
	}
	os.Exit(run())
}

func onSQS() bool { return os.Getenv("ROOKERY_TEST_EVENTS") == "sqs" }

// openLog opens the fixture's event log: SNS/SQS with ROOKERY_TEST_EVENTS=sqs, else the embedded
// log (in the store's engine on Pebble, as rookery serve runs it).
func openLog(t testing.TB, db *pebble.DB) events.Log {
	t.Helper()
	if onSQS() {
		groups := map[string][]string{"audit": nil}
		for g, types := range app.GroupTypes {
			groups[g] = types
		}
		l, err := sqs.Open(context.Background(), sqs.Options{AWS: awsconf.Options{Endpoint: sqstest.Endpoint(t)},
			Prefix: sqstest.Prefix(), Groups: groups, WaitTime: time.Second, PublishBatch: 9})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Destroy(context.Background()) })
		return l
	}
	logOpts := embedded.Options{InMemory: true, Partitions: 2}
	if db != nil {
		logOpts = embedded.Options{Engine: db.Engine(), Partitions: 2}
	}
	evlog, err := embedded.Open(logOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evlog.Close() })
	return evlog
}

// followerCache is the follower-list cache the fixture's App keeps: on Pebble, as rookery serve.
func followerCache(onPebble bool) int {
	if onPebble {
		return 1_000_000
	}
	return 0
}

func openStore(t testing.TB, clock rookery.Clock) table.Table {
	return testtable.FromEnv(t, app.Schema, clock)
}

func newFixture(t testing.TB) (*fixture, *flakyStore) { return newFixtureWith(t, fixtureConfig{}) }

func newFixtureWith(t testing.TB, cfg fixtureConfig) (*fixture, *flakyStore) {
	t.Helper()
	clock := rookery.ClockFunc(time.Now)
	store := &flakyStore{Table: openStore(t, clock)}
	v, err := auth.NewVerifier(secret, nil, clock)
	if err != nil {
		t.Fatal(err)
	}
	// On Pebble, as `rookery serve` runs it: the log in the store's engine, the store appending the
	// outbox's events in their transactions.
	db, onPebble := store.Table.(*pebble.DB)
	evlog := openLog(t, db)
	logs := &syncWriter{}
	var n atomic.Int64
	m := metrics.New()
	observed := table.Observed(store, m.ObserveStore)
	tl, lose := openTimelines(t, cfg, store)
	hub := &live.Hub{}
	var dispatcher *webhook.Dispatcher
	outbox := &events.Outbox{Table: observed, Log: evlog, Shards: 4, Poll: 10 * time.Millisecond}
	if stager, ok := evlog.(*embedded.Log); ok && onPebble {
		db.SetStager(stager)
		outbox.Direct = true
	}
	application := app.New(app.Deps{Table: observed, Events: evlog, Outbox: outbox, Clock: clock,
		IDs: func() string { return ulid.Make().String() }, Timelines: tl,
		CelebrityThreshold: cfg.celebrityThreshold, TimelineCap: cfg.timelineCap, Engagement: cfg.engagement,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), OnRebuild: m.ObserveRebuild,
		OtherGroups: []string{"audit"}, // a group outside the App, as the analytics export's is
		Streams:     live.Local{Hub: hub},
		// The receivers of the tests listen on loopback, over plain http.
		WebhookPolicy:   app.WebhookPolicy{AllowHTTP: !cfg.strictWebhooks, AllowPrivate: !cfg.strictWebhooks},
		OnWebhookQueued: func(ep string) { dispatcher.Wake(ep) },
		// As rookery serve sets them on the embedded store.
		UnsyncedConsumers: outbox.Direct, FollowerCacheIDs: followerCache(onPebble), SoleWriter: onPebble, FeedPages: app.DefaultFeedPages, PostCacheTTL: app.DefaultPostCacheTTL, BilledReads: !onPebble, IndexLag: indexLag(onPebble), DeletedGrace: cfg.deletedGrace})
	dispatcher = webhook.New(webhook.Options{Queue: application, Concurrency: 4, Timeout: 500 * time.Millisecond,
		Retries: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}, Poll: 20 * time.Millisecond,
		AllowPrivate: !cfg.strictWebhooks && !cfg.refusePrivateDial, Observe: m.ObserveWebhook, Backlog: m.SetWebhookBacklog,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	dctx, stopDispatcher := context.WithCancel(context.Background())
	dispatched := make(chan struct{})
	go func() { dispatcher.Run(dctx); close(dispatched) }()
	t.Cleanup(func() { stopDispatcher(); <-dispatched })
	// The pipeline runs as in production: the relay and the application's consumers.
	consumers := application.Consumers()
	if cfg.holdErasure != nil {
		for i, c := range consumers {
			if c.Group == app.ErasureGroup {
				handle := c.Handle
				consumers[i].Handle = func(ctx context.Context, ev rookery.Event) error {
					select {
					case <-cfg.holdErasure:
					case <-ctx.Done():
						return ctx.Err()
					}
					return handle(ctx, ev)
				}
			}
		}
	}
	pipeline := eventstest.RunPipeline(t, outbox, evlog, consumers)
	h := httpapi.NewServer(httpapi.Deps{
		App:      application,
		Verifier: v,
		Metrics:  m,
		Log:      slog.New(slog.NewTextHandler(logs, nil)),
		NewID:    func() string { return "req-" + strconv.FormatInt(n.Add(1), 10) },
		Ready:    map[string]func(context.Context) error{"store": store.Ping},
		Streams:  httpapi.StreamOptions{Hub: hub, Heartbeat: cmp.Or(cfg.heartbeat, 200*time.Millisecond), Buffer: cfg.streamBuffer},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{hub: hub, t: t, srv: srv, store: store, logs: logs, evlog: evlog, pipeline: pipeline, loseTimeline: lose, timelines: tl}, store
}

// openTimelines returns the timeline store cfg names and a function that makes a user's timeline
// vanish.
func openTimelines(t testing.TB, cfg fixtureConfig, store table.Table) (timeline.Store, func(string)) {
	limits := timeline.Limits{Cap: cfg.timelineCap}
	if db, ok := store.(*flakyStore).Table.(*pebble.DB); ok && cfg.timelines == "" {
		s := pebblestore.New(db.Engine(), pebblestore.Options{Limits: limits, SweepEvery: -1})
		t.Cleanup(func() { s.Close() })
		return s, func(user string) {
			if err := db.Engine().Delete(append([]byte{'h'}, user...), nil); err != nil { // its marker
				t.Fatal(err)
			}
			s.Forget(user) // as the marker's expiry would leave the Store
		}
	}
	if cfg.timelines != "redis" {
		return testtable.Timelines(t, store, tablestore.Options{Limits: limits}), func(user string) {
			if err := store.Delete(context.Background(), table.Key{PK: "FEED#" + user, SK: "~"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	addr := cmp.Or(cfg.redisAddr, testenv.RedisAddr())
	client := goredis.NewUniversalClient(tlredis.ClientOptions([]string{addr}))
	prefix := fmt.Sprintf("rookeryhttp-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := tlredis.New(client, tlredis.Options{Prefix: prefix, Limits: timeline.Limits{Cap: cfg.timelineCap}})
	t.Cleanup(func() { s.Drop(context.Background()); client.Close() })
	return s, func(user string) {
		if err := client.Del(context.Background(), "{"+prefix+":"+user+"}:tl").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// drain waits until the pipeline is idle (up to 30 s).
func (f *fixture) drain() {
	f.t.Helper()
	f.pipeline.Drain(f.t, 30*time.Second)
}

// syncWriter lets the server's goroutines log into one builder.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func token(t tb, sub string, server bool) string {
	t.Helper()
	tok, err := auth.Mint(secret, sub, server, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (f *fixture) do(method, path, tok, body string, headers ...string) reply {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkContract(f.t, req, resp, raw)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	json.Unmarshal(raw, &r.body)
	return r
}

func (f *fixture) want(r reply, status int, code string) {
	f.t.Helper()
	if r.status != status {
		f.t.Fatalf("status %d; want %d; body %s", r.status, status, r.raw)
	}
	if code == "" {
		return
	}
	if r.header.Get("Content-Type") != "application/problem+json" {
		f.t.Fatalf("error reply has Content-Type %q", r.header.Get("Content-Type"))
	}
	if r.body["code"] != code || r.body["status"] != float64(status) || r.body["title"] == "" || r.body["detail"] == "" {
		f.t.Fatalf("problem %s; want code %s", r.raw, code)
	}
	// docs/api.md: invalid adds fields (empty when no one field is at fault); other codes have none.
	if _, isList := r.body["fields"].([]any); isList != (code == "invalid") {
		f.t.Fatalf("problem %s: fields with code %s", r.raw, code)
	}
}

func TestUsersThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	alice, bob, app := token(t, "alice", false), token(t, "bob", false), token(t, "app", true)

	r := f.do("PUT", "/v1/users/alice", alice, `{"username":"Alice","display_name":"Alice A.","bio":"hi","timezone":"Asia/Tokyo"}`)
	f.want(r, 201, "")
	if r.body["username"] != "Alice" || r.body["timezone"] != "Asia/Tokyo" || r.body["follower_count"] != float64(0) {
		t.Fatalf("created user = %s", r.raw)
	}
	created := r.body["created_at"].(string)
	if _, err := time.Parse(rookery.TimeLayout, created); err != nil || len(created) != len("2026-11-22T10:04:05.123Z") {
		t.Fatalf("created_at %q is not RFC 3339 UTC with milliseconds", created)
	}
	// Updating keeps created_at and answers 200.
	r = f.do("PUT", "/v1/users/alice", alice, `{"username":"alice","bio":"changed"}`)
	f.want(r, 200, "")
	if r.body["created_at"] != created || r.body["bio"] != "changed" || r.body["display_name"] != "alice" || r.body["timezone"] != "UTC" {
		t.Fatalf("updated user = %s", r.raw)
	}
	// The username is unique case-insensitively; a server token may act for anyone.
	f.want(f.do("PUT", "/v1/users/bob", bob, `{"username":"ALICE"}`), 409, "conflict")
	f.want(f.do("PUT", "/v1/users/bob", app, `{"username":"bob"}`), 201, "")
	// Renaming frees the old name.
	f.want(f.do("PUT", "/v1/users/alice", alice, `{"username":"alice2"}`), 200, "")
	f.want(f.do("PUT", "/v1/users/carol", app, `{"username":"alice"}`), 201, "")
	f.want(f.do("GET", "/v1/usernames/alice2", bob, ""), 200, "")
	if r := f.do("GET", "/v1/usernames/ALICE", bob, ""); r.body["id"] != "carol" {
		t.Fatalf("lookup of a freed and re-taken username = %s", r.raw)
	}
	f.want(f.do("GET", "/v1/users/nobody", bob, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/usernames/nobody", bob, ""), 404, "not_found")
	// A user who was never created has no lists: they are 404 as the user is, to anyone, and so
	// are the reads of a caller who is no user. A user who exists and has nothing gets empty lists.
	nobody, carol := token(t, "nobody", false), token(t, "carol", false)
	for _, who := range []struct{ id, tok string }{{"nobody", nobody}, {"carol", carol}} {
		want := 404
		if who.id == "carol" {
			want = 200
		}
		for _, path := range []string{"followers", "following", "posts", "blocks", "mutes"} {
			for _, tok := range []string{who.tok, app} {
				if r := f.do("GET", "/v1/users/"+who.id+"/"+path, tok, ""); r.status != want || want == 200 && r.raw != `{"items":[],"next_cursor":null}`+"\n" {
					t.Fatalf("GET /v1/users/%s/%s = %d %s; want %d", who.id, path, r.status, r.raw, want)
				}
			}
		}
		for _, path := range []string{"/v1/feed", "/v1/notifications", "/v1/notifications?unread=true", "/v1/notifications/unread_count"} {
			if r := f.do("GET", path, who.tok, ""); r.status != want {
				t.Fatalf("GET %s as %s = %d %s; want %d", path, who.id, r.status, r.raw, want)
			}
		}
		if r := f.do("POST", "/v1/stream/tickets", who.tok, ""); r.status != map[int]int{404: 404, 200: 201}[want] {
			t.Fatalf("POST /v1/stream/tickets as %s = %d %s", who.id, r.status, r.raw)
		}
		if r := f.do("POST", "/v1/notifications/read", who.tok, `{"all":true}`); r.status != map[int]int{404: 404, 200: 204}[want] {
			t.Fatalf("POST /v1/notifications/read as %s = %d %s", who.id, r.status, r.raw)
		}
		// A follow, block or mute is made and taken back between users, and taking back one that
		// is not there is 204; a user who does not exist is 404 on either side of it.
		status := func(ok int) int {
			if want == 404 {
				return 404
			}
			return ok
		}
		for _, rel := range []string{"following", "blocks", "mutes"} {
			mine, bobs := "/v1/users/"+who.id+"/"+rel+"/bob", "/v1/users/bob/"+rel+"/"+who.id
			for _, req := range []struct {
				method, path, tok string
				status            int
			}{
				{"PUT", mine, who.tok, status(map[string]int{"following": 200, "blocks": 204, "mutes": 204}[rel])},
				{"DELETE", mine, who.tok, status(204)},
				{"DELETE", mine, who.tok, status(204)},
				{"DELETE", bobs, bob, status(204)},
			} {
				if r := f.do(req.method, req.path, req.tok, ""); r.status != req.status {
					t.Fatalf("%s %s = %d %s; want %d", req.method, req.path, r.status, r.raw, req.status)
				}
			}
		}
	}
	if r := f.do("GET", "/v1/users/bob", alice, ""); r.body["username"] != "bob" {
		t.Fatalf("GET user = %s", r.raw)
	}
	// Acting for someone else is forbidden.
	f.want(f.do("PUT", "/v1/users/bob", alice, `{"username":"bobby"}`), 403, "forbidden")
}

func TestBadInput(t *testing.T) {
	f, _ := newFixture(t)
	alice := token(t, "alice", false)
	cases := []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"an unknown field", `{"username":"alice","colour":"red"}`, 400, "invalid", "colour"},
		{"a field of the wrong type", `{"username":42}`, 400, "invalid", "username"},
		// Unknown fields are named before other errors, wherever they are in the body.
		{"an unknown field after a wrong type", `{"username":42,"colour":"red"}`, 400, "invalid", "colour"},
		{"two unknown fields", `{"size":1,"colour":"red","username":"alice"}`, 400, "invalid", "colour"},
		{"a username too short", `{"username":"al"}`, 400, "invalid", "username"},
		{"a username with a separator", `{"username":"al#ce"}`, 400, "invalid", "username"},
		{"an unknown time zone", `{"username":"alice","timezone":"Mars/Olympus"}`, 400, "invalid", "timezone"},
		{"the Local time zone", `{"username":"alice","timezone":"Local"}`, 400, "invalid", "timezone"},
		{"an empty display name", `{"username":"alice","display_name":""}`, 400, "invalid", "display_name"},
		{"a display name of spaces", `{"username":"alice","display_name":" \u00a0 "}`, 400, "invalid", "display_name"},
		{"a display name of two lines", `{"username":"alice","display_name":"Alice\nSmith"}`, 400, "invalid", "display_name"},
		{"a long bio", `{"username":"alice","bio":"` + strings.Repeat("é", 501) + `"}`, 400, "invalid", "bio"},
		{"malformed JSON", `{"username":`, 400, "invalid", ""},
		{"bytes that are not UTF-8", "{\"username\":\"alice\",\"bio\":\"caf\xe9\"}", 400, "invalid", ""},
		{"two JSON values", `{"username":"alice"} {}`, 400, "invalid", ""},
		{"an array body", `[1,2]`, 400, "invalid", ""},
		{"a body over 64 KiB", `{"username":"alice","bio":"` + strings.Repeat("x", 70_000) + `"}`, 413, "too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			r := f.do("PUT", "/v1/users/alice", alice, c.body)
			f.want(r, c.status, c.code)
			if c.field != "" {
				fields, _ := r.body["fields"].([]any)
				if len(fields) == 0 || fields[0].(map[string]any)["name"] != c.field {
					t.Fatalf("fields = %v; want %s named", r.body["fields"], c.field)
				}
			}
		})
	}
	f.t = t
	f.want(f.do("PUT", "/v1/users/al%23ice", alice, `{"username":"alice"}`), 400, "invalid")
	f.want(f.do("PUT", "/v1/users/"+strings.Repeat("a", 65), alice, `{"username":"alice"}`), 400, "invalid")
	// A form body is refused, not guessed at.
	r := f.do("PUT", "/v1/users/alice", alice, "", "Content-Type", "application/x-www-form-urlencoded")
	f.want(r, 400, "invalid")
	// Nothing was written by any of them.
	f.want(f.do("GET", "/v1/users/alice", alice, ""), 404, "not_found")
}

func TestAuthentication(t *testing.T) {
	f, _ := newFixture(t)
	app, alice := token(t, "app", true), token(t, "alice", false)
	for name, hdr := range map[string]string{
		"no header":       "",
		"not bearer":      "Basic YWxpY2U6cHc=",
		"a bad token":     "Bearer x.y.z",
		"an empty bearer": "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			f.t = t
			req, _ := http.NewRequest("GET", f.srv.URL+"/v1/users/alice", nil)
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	f.t = t
	// X-On-Behalf-Of: server tokens only, and only a valid user id.
	f.want(f.do("PUT", "/v1/users/alice", app, `{"username":"alice"}`, "X-On-Behalf-Of", "alice"), 201, "")
	f.want(f.do("GET", "/v1/users/alice", alice, "", "X-On-Behalf-Of", "bob"), 403, "forbidden")
	f.want(f.do("GET", "/v1/users/alice", app, "", "X-On-Behalf-Of", "USER#x"), 400, "invalid")
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	f, store := newFixture(t)
	secretText := errors.New("dial tcp 10.1.2.3:8000: pebble: corrupt sstable 000123.sst at key USER#alice")
	internal := rookery.E(rookery.Op("pebble.Get"), rookery.Internal, secretText)
	store.err.Store(&internal)
	r := f.do("GET", "/v1/users/alice", token(t, "alice", false), "")
	f.want(r, 500, "internal")
	for _, leak := range []string{"10.1.2.3", "sstable", "USER#", "pebble"} {
		if strings.Contains(r.raw, leak) {
			t.Fatalf("reply leaks %q: %s", leak, r.raw)
		}
	}
	if !strings.Contains(f.logs.String(), "corrupt sstable") || !strings.Contains(f.logs.String(), r.body["request_id"].(string)) {
		t.Fatal("the internal error was not logged with its request id")
	}
	// Unavailable is 503 with Retry-After, and /readyz names the failing part.
	unavailable := rookery.E(rookery.Op("dynamo.Get"), rookery.Unavailable, "DynamoDB is unreachable", secretText)
	store.err.Store(&unavailable)
	r = f.do("GET", "/v1/users/alice", token(t, "alice", false), "")
	f.want(r, 503, "unavailable")
	if r.header.Get("Retry-After") == "" || strings.Contains(r.raw, "10.1.2.3") {
		t.Fatalf("503 reply: %v %s", r.header, r.raw)
	}
	r = f.do("GET", "/readyz", "", "")
	if r.status != 503 || !strings.Contains(r.raw, `"store"`) || strings.Contains(r.raw, "10.1.2.3") {
		t.Fatalf("readyz = %d %s", r.status, r.raw)
	}
	store.err.Store(nil)
	if r := f.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz after recovery = %d", r.status)
	}
}

func TestOperationsRoutes(t *testing.T) {
	f, _ := newFixture(t)
	if r := f.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz = %d", r.status)
	}
	f.want(f.do("GET", "/v2/anything", "", ""), 404, "not_found")
	r := f.do("POST", "/v1/users/alice", token(t, "alice", false), "")
	if r.status != 405 || !strings.Contains(r.header.Get("Allow"), "GET") || !strings.Contains(r.header.Get("Allow"), "PUT") || !strings.Contains(r.header.Get("Allow"), "DELETE") {
		t.Fatalf("405 reply: %d %v", r.status, r.header)
	}
	// A client's request id is echoed; otherwise one is made.
	if r := f.do("GET", "/healthz", "", "", "X-Request-Id", "abc-123"); r.header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("X-Request-Id = %q", r.header.Get("X-Request-Id"))
	}
	if r := f.do("GET", "/healthz", "", ""); !strings.HasPrefix(r.header.Get("X-Request-Id"), "req-") {
		t.Fatalf("generated X-Request-Id = %q", r.header.Get("X-Request-Id"))
	}
	f.do("GET", "/v1/users/x", token(t, "alice", false), "")
	resp, err := http.Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`rookery_http_request_duration_seconds_bucket{method="GET",route="GET /v1/users/{id}",status="404"`,
		`rookery_http_requests_in_flight`,
		`rookery_store_operation_duration_seconds_bucket{op="Get"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

func TestDeadLetterAdministration(t *testing.T) {
	f, _ := newFixture(t)
	ctx := context.Background()
	for i := range 3 {
		id := fmt.Sprintf("ev%d", i)
		if err := f.evlog.DeadLetter(ctx, "audit", events.DeadLetter{Event: eventstest.Event(id, "k", i), Error: "boom", Attempts: 8}); err != nil {
			t.Fatal(err)
		}
	}
	app, alice := token(t, "app", true), token(t, "alice", false)
	// Only server tokens administer the queue.
	f.want(f.do("GET", "/v1/admin/dlq/audit", alice, ""), 403, "forbidden")
	f.want(f.do("POST", "/v1/admin/dlq/audit/ev0/replay", alice, ""), 403, "forbidden")
	f.want(f.do("DELETE", "/v1/admin/dlq/audit/ev0", alice, ""), 403, "forbidden")
	f.want(f.do("GET", "/v1/admin/dlq/audit", "", ""), 401, "unauthenticated")
	f.want(f.do("GET", "/v1/admin/dlq/nope", app, ""), 404, "not_found")
	r := f.do("GET", "/v1/admin/dlq/audit?limit=2", app, "")
	f.want(r, 200, "")
	items := r.body["items"].([]any)
	if len(items) != 2 || r.body["next_cursor"] != "ev1" {
		t.Fatalf("first page = %s", r.raw)
	}
	r = f.do("GET", "/v1/admin/dlq/audit?limit=2&cursor=ev1", app, "")
	if items := r.body["items"].([]any); len(items) != 1 || r.body["next_cursor"] != nil {
		t.Fatalf("second page = %s", r.raw)
	}
	r = f.do("GET", "/v1/admin/dlq/audit/ev1", app, "")
	f.want(r, 200, "")
	if r.body["error"] != "boom" || r.body["attempts"] != float64(8) {
		t.Fatalf("show = %s", r.raw)
	}
	f.want(f.do("POST", "/v1/admin/dlq/audit/ev1/replay", app, ""), 204, "")
	f.want(f.do("DELETE", "/v1/admin/dlq/audit/ev2", app, ""), 204, "")
	f.want(f.do("GET", "/v1/admin/dlq/audit/ev1", app, ""), 404, "not_found")
	f.want(f.do("DELETE", "/v1/admin/dlq/audit/ev2", app, ""), 404, "not_found")
	f.want(f.do("GET", "/v1/admin/dlq/audit?limit=500", app, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/admin/dlq/bad%20group", app, ""), 400, "invalid")
	if r := f.do("GET", "/v1/admin/dlq/audit", app, ""); len(r.body["items"].([]any)) != 1 {
		t.Fatalf("after replay and drop: %s", r.raw)
	}
	// The replayed event is delivered to its group again.
	s, err := f.evlog.Subscribe(ctx, "audit", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := s.Next(c)
	if err != nil || d.Event().ID != "ev1" {
		t.Fatalf("replayed delivery: %v, %v", d, err)
	}
}

// indexLag is rookery serve's: DynamoDB's indexes lag its writes, Pebble's do not.
func indexLag(onPebble bool) time.Duration {
	if onPebble {
		return 0
	}
	return app.DynamoIndexLag
}
