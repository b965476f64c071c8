package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/bench"
	cacheredis "github.com/rookery/rookery/cache/redis"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	natslog "github.com/rookery/rookery/events/nats"
	"github.com/rookery/rookery/export"
	"github.com/rookery/rookery/internal/testenv"
	rlredis "github.com/rookery/rookery/ratelimit/redis"
	"github.com/rookery/rookery/table/dynamo"
	"github.com/rookery/rookery/table/dynamo/dynamotest"
	tlredis "github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/tablestore"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// env turns a map into the getenv that run takes.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

type server struct {
	url  string
	stop func() // cancels run's context and waits for it to return nil
}

// start runs `rookery serve args...` in-process on a free port and waits until it listens.
func start(t *testing.T, vars map[string]string, args ...string) server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...), env(vars), pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("serve did not start: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "listening on http://")
	url, _, _ := strings.Cut(rest, " ")
	if !ok || url == "" {
		t.Fatalf("unexpected start line %q", line)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	}
	t.Cleanup(stop)
	return server{url: "http://" + url, stop: stop}
}

// command runs a one-shot subcommand and returns its stdout.
func command(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, env(vars), &out, io.Discard); err != nil {
		t.Fatalf("rookery %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// send sends a JSON request with a bearer token (none if "") and returns the reply.
func send(t *testing.T, method, url, tok, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// call sends a request and returns the reply's status and JSON body.
func call(t *testing.T, method, url, tok, body string) (int, map[string]any) {
	t.Helper()
	resp := send(t, method, url, tok, body)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestEmbeddedServeTokenAndRestart(t *testing.T) {
	dir := t.TempDir()
	// serve generates the secret on its first start; a token minted on the same data dir reads it.
	srv := start(t, nil, "--data-dir", dir)
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "alice", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/alice", tok, `{"username":"alice"}`); st != 201 {
		t.Fatalf("PUT user = %d %v", st, body)
	}
	if fi, err := os.Stat(filepath.Join(dir, "auth.secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated secret: %v, %v", fi, err)
	}
	srv.stop()
	// The store closed cleanly and reopens with the user in it.
	srv = start(t, nil, "--data-dir", dir)
	if st, body := call(t, "GET", srv.url+"/v1/users/alice", tok, ""); st != 200 || body["username"] != "alice" {
		t.Fatalf("GET after restart = %d %v", st, body)
	}
	if st, _ := call(t, "GET", srv.url+"/readyz", "", ""); st != 200 {
		t.Fatalf("readyz = %d", st)
	}
	// The pipeline runs in serve: a follow reaches the counters consumer.
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/bob", server, `{"username":"bob"}`); st != 201 {
		t.Fatalf("PUT bob = %d %v", st, body)
	}
	if st, body := call(t, "PUT", srv.url+"/v1/users/alice/following/bob", tok, ""); st != 200 {
		t.Fatalf("follow = %d %v", st, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := call(t, "GET", srv.url+"/v1/users/bob", tok, "")
		if body["follower_count"] == float64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's follower_count never became 1: %v", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"ROOKERY_DATA_DIR": dir, "ROOKERY_AUTH_SECRET": strings.Repeat("s", 40)}
	srv := start(t, vars)
	tok := strings.TrimSpace(command(t, vars, "token", "--sub", "bob", "--server"))
	if st, body := call(t, "PUT", srv.url+"/v1/users/bob", tok, `{"username":"bobby"}`); st != 201 {
		t.Fatalf("PUT with a token from the env secret = %d %v", st, body)
	}
	// The env secret was used: nothing was generated in the data dir.
	if _, err := os.Stat(filepath.Join(dir, "auth.secret")); err == nil {
		t.Fatal("a secret was generated although ROOKERY_AUTH_SECRET was set")
	}
	// A flag on the command line wins over the environment.
	srv2 := start(t, map[string]string{"ROOKERY_ADDR": "256.0.0.1:1"}, "--data-dir", t.TempDir())
	if st, _ := call(t, "GET", srv2.url+"/healthz", "", ""); st != 200 {
		t.Fatalf("healthz = %d", st)
	}
	// A bad value names its variable.
	err := run(context.Background(), []string{"serve"}, env(map[string]string{"ROOKERY_SHUTDOWN_TIMEOUT": "soon"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ROOKERY_SHUTDOWN_TIMEOUT") {
		t.Fatalf("bad env value: %v", err)
	}
	for _, args := range [][]string{
		{"serve", "--store", "sqlite", "--data-dir", t.TempDir()},
		{"serve", "--role", "everything", "--data-dir", t.TempDir()},
		{"serve", "--auth-secret", "short", "--data-dir", t.TempDir()},
		{"serve", "--wal-sync-interval", "-1ms", "--data-dir", t.TempDir()},
		{"token"},
	} {
		if err := run(context.Background(), args, env(nil), io.Discard, io.Discard); err == nil {
			t.Fatalf("rookery %v succeeded", args)
		}
	}
}

func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir) // it makes the secret token signs with
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "carol", "--data-dir", dir))
	body, w := io.Pipe()
	req, _ := http.NewRequest("PUT", srv.url+"/v1/users/carol", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		resp.Body.Close()
		res <- result{status: resp.StatusCode}
	}()
	io.WriteString(w, `{"username":`) // the request is now in flight
	time.Sleep(100 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { srv.stop(); close(stopped) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("the server stopped with a request in flight")
	default:
	}
	io.WriteString(w, `"carol"}`)
	w.Close()
	if r := <-res; r.err != nil || r.status != 201 {
		t.Fatalf("in-flight request: %d, %v", r.status, r.err)
	}
	<-stopped
}

func TestWorkerRoleServesOnlyOperations(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--role", "worker")
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "x", "--data-dir", dir))
	if st, _ := call(t, "GET", srv.url+"/v1/users/x", tok, ""); st != 404 {
		t.Fatalf("worker served /v1: %d", st)
	}
	if st, _ := call(t, "GET", srv.url+"/readyz", "", ""); st != 200 {
		t.Fatalf("worker readyz = %d", st)
	}
}

func TestDynamoMigrateAndServe(t *testing.T) {
	endpoint := dynamotest.Endpoint(t)
	name := fmt.Sprintf("rookery-e2e-%d", time.Now().UnixNano())
	vars := map[string]string{
		"ROOKERY_DYNAMO_ENDPOINT": endpoint, "ROOKERY_DYNAMO_TABLE": name, "ROOKERY_DYNAMO_REGION": "us-east-1",
		"ROOKERY_AWS_ACCESS_KEY_ID": "test", "ROOKERY_AWS_SECRET_ACCESS_KEY": "test",
		"ROOKERY_AUTH_SECRET": strings.Repeat("d", 32), "ROOKERY_STORE": "dynamo",
	}
	out := command(t, vars, "migrate")
	if !strings.Contains(out, "creating table "+name) || !strings.Contains(out, "ready") {
		t.Fatalf("migrate said %q", out)
	}
	t.Cleanup(func() { dynamo.DropTable(context.Background(), dynamotest.Client(t), name) })
	if out := command(t, vars, "migrate"); strings.Contains(out, "creating") || strings.Contains(out, "adding") {
		t.Fatalf("second migrate changed things: %q", out)
	}
	srv := start(t, vars, "--data-dir", t.TempDir())
	tok := strings.TrimSpace(command(t, vars, "token", "--sub", "dana"))
	if st, body := call(t, "PUT", srv.url+"/v1/users/dana", tok, `{"username":"dana"}`); st != 201 {
		t.Fatalf("PUT on DynamoDB = %d %v", st, body)
	}
	if st, body := call(t, "GET", srv.url+"/v1/usernames/DANA", tok, ""); st != 200 || body["id"] != "dana" {
		t.Fatalf("GET on DynamoDB = %d %v", st, body)
	}
	// A table that does not exist makes the server unready, not broken.
	vars["ROOKERY_DYNAMO_TABLE"] = name + "-missing"
	srv2 := start(t, vars, "--data-dir", t.TempDir())
	if st, body := call(t, "GET", srv2.url+"/readyz", "", ""); st != 503 || fmt.Sprint(body["failing"]) != "[store]" {
		t.Fatalf("readyz without a table = %d %v", st, body)
	}
	if st, body := call(t, "GET", srv2.url+"/v1/users/dana", tok, ""); st != 503 || body["code"] != "unavailable" {
		t.Fatalf("GET without a table = %d %v", st, body)
	}
}

// TestNewcomerErrors: the mistakes of a first hour get a message that says what to do.
func TestNewcomerErrors(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	// token with no secret where it looks: it says so, and makes none.
	err := run(context.Background(), []string{"token", "--sub", "alice", "--data-dir", dir}, env(nil), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no secret at") {
		t.Fatalf("token without a secret: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "auth.secret")); serr == nil {
		t.Fatal("token made a secret")
	}
	// migrate on the embedded store has nothing to do and says why.
	if got := command(t, nil, "migrate"); !strings.Contains(got, "--store dynamo") {
		t.Fatalf("migrate on the embedded store said %q", got)
	}
	// streaks repair without its flags.
	err = run(context.Background(), []string{"streaks", "repair"}, env(nil), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--from and --to are required") || strings.Contains(err.Error(), "parsing time") {
		t.Fatalf("streaks repair without flags: %v", err)
	}
	// A second serve on a data directory another holds.
	srv := start(t, map[string]string{"ROOKERY_AUTH_SECRET": strings.Repeat("x", 32)}, "--data-dir", dir)
	_ = srv
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, env(map[string]string{"ROOKERY_AUTH_SECRET": strings.Repeat("x", 32)}), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "another process holds") {
		t.Fatalf("a second serve on one data directory: %v", err)
	}
}

func TestVersion(t *testing.T) {
	if out := command(t, nil, "version"); !strings.HasPrefix(out, "rookery dev") {
		t.Fatalf("version = %q", out)
	}
}

// TestBinaryStopsOnSIGTERM builds the real binary and stops it with SIGTERM: main wires signals to
// run's context.
func TestBinaryStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rookery")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "listening on http://127.0.0.1:") {
		cmd.Process.Kill()
		t.Fatalf("start line %q: %v\n%s", line, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("did not stop on SIGTERM")
	}
	if !strings.Contains(stderr.String(), "msg=stopped") {
		t.Fatalf("no clean stop in the log:\n%s", stderr.String())
	}
}

// TestDLQCommandThroughTheServer runs `rookery dlq` against a server on NATS JetStream: dead letters
// written into the deployment's streams are listed, shown, replayed and dropped through the server.
func TestDLQCommandThroughTheServer(t *testing.T) {
	ctx := context.Background()
	// A group the server knows but does not consume (the analytics export, without --export-dir):
	// its own consumers would race the test for the replayed event.
	const deadGroup = ExportGroup
	natsURL := testenv.NATSURL()
	prefix := fmt.Sprintf("rookerye2e_%d", time.Now().UnixNano())
	l, err := natslog.Open(ctx, natslog.Options{URL: natsURL, Prefix: prefix, Partitions: 2})
	if err != nil {
		t.Fatalf("NATS at %s: %v", natsURL, err)
	}
	defer func() { l.Destroy(ctx); l.Close() }()
	for _, id := range []string{"01A", "01B"} {
		if err := l.DeadLetter(ctx, deadGroup, events.DeadLetter{Event: eventstest.Event(id, "k", 1), Error: "timeline store down", Attempts: 8}); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"ROOKERY_AUTH_SECRET": strings.Repeat("n", 32), "ROOKERY_EVENTS": "nats",
		"ROOKERY_NATS_URL": natsURL, "ROOKERY_NATS_PREFIX": prefix, "ROOKERY_EVENT_PARTITIONS": "2"}
	srv := start(t, vars, "--data-dir", t.TempDir())
	vars["ROOKERY_SERVER"] = srv.url
	var stdout bytes.Buffer
	err = run(ctx, []string{"dlq", "list", "--group", "nope"}, env(vars), &stdout, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `no consumer group "nope"`) || !strings.Contains(err.Error(), "notifications") {
		t.Fatalf("dlq list of an unknown group: %v", err)
	}
	out := command(t, vars, "dlq", "list", "--group", deadGroup)
	if !strings.Contains(out, "01A") || !strings.Contains(out, "01B") || !strings.Contains(out, "timeline store down") {
		t.Fatalf("dlq list:\n%s", out)
	}
	if out := command(t, vars, "dlq", "show", "--group", deadGroup, "01A"); !strings.Contains(out, `"attempts": 8`) {
		t.Fatalf("dlq show:\n%s", out)
	}
	command(t, vars, "dlq", "replay", "--group", deadGroup, "01A")
	command(t, vars, "dlq", "drop", "--group", deadGroup, "01B")
	if out := command(t, vars, "dlq", "list", "--group", deadGroup); strings.Contains(out, "01A") || strings.Contains(out, "01B") {
		t.Fatalf("after replay and drop:\n%s", out)
	}
	err = run(ctx, []string{"dlq", "show", "--group", deadGroup, "01B"}, env(vars), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("show of a dropped dead letter: %v", err)
	}
	// The replayed event is waiting for the group.
	s, err := l.Subscribe(ctx, deadGroup, events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if d, err := s.Next(c); err != nil || d.Event().ID != "01A" {
		t.Fatalf("replayed event: %v, %v", d, err)
	}
}

func TestRedisTimelinesConfiguration(t *testing.T) {
	srv := start(t, nil, "--data-dir", t.TempDir(), "--timelines", "redis", "--redis-addr", testenv.RedisAddr(), "--redis-prefix", redisPrefix(t))
	if st, body := call(t, "GET", srv.url+"/readyz", "", ""); st != 200 {
		t.Fatalf("readyz with Redis timelines = %d %v", st, body)
	}
	err := run(context.Background(), []string{"serve", "--data-dir", t.TempDir(), "--timelines", "memcached"}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--timelines") {
		t.Fatalf("unknown timeline store: %v", err)
	}
}

// TestHomeFeedEndToEnd runs the binary's serve with each timeline store: a followee's post reaches
// the follower's feed (fan-out ran in serve), a delete leaves it at once, and the first read of a
// new reader's feed (a rebuild) is complete.
func TestHomeFeedEndToEnd(t *testing.T) {
	for _, store := range []string{"store", "table", "redis"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			srv := start(t, nil, "--data-dir", dir, "--timelines", store, "--redis-addr", testenv.RedisAddr(), "--redis-prefix", redisPrefix(t))
			tok := func(sub string) string {
				return strings.TrimSpace(command(t, nil, "token", "--sub", sub, "--data-dir", dir))
			}
			alice, bob, carol := tok("alice"), tok("bob"), tok("carol")
			for u, tk := range map[string]string{"alice": alice, "bob": bob, "carol": carol} {
				if st, body := call(t, "PUT", srv.url+"/v1/users/"+u, tk, `{"username":"`+u+`"}`); st != 201 {
					t.Fatalf("PUT %s = %d %v", u, st, body)
				}
			}
			feed := func(tk string) []any {
				st, body := call(t, "GET", srv.url+"/v1/feed?limit=10", tk, "")
				if st != 200 {
					t.Fatalf("GET /v1/feed = %d %v", st, body)
				}
				return body["items"].([]any)
			}
			feed(alice) // alice's timeline exists from now on: posts reach it by fan-out
			for _, f := range []string{"alice", "carol"} {
				if st, body := call(t, "PUT", srv.url+"/v1/users/"+f+"/following/bob", map[string]string{"alice": alice, "carol": carol}[f], ""); st != 200 {
					t.Fatalf("follow = %d %v", st, body)
				}
			}
			_, p1 := call(t, "POST", srv.url+"/v1/posts", bob, `{"text":"one"}`)
			_, p2 := call(t, "POST", srv.url+"/v1/posts", bob, `{"text":"two"}`)
			if items := feed(carol); len(items) != 2 || items[0].(map[string]any)["id"] != p2["id"] {
				t.Fatalf("carol's first read (a rebuild) = %v", items)
			}
			// Both posts fanned out (the service reports fan-out lag per post): until then a read may
			// show fewer posts than a moment before — a timeline that was empty is read by pulling,
			// one that holds p1 but not yet p2 shows what it holds.
			fannedOut := func() string {
				return metricOf(t, srv.url, `rookery_event_age_at_handling_seconds_count{group="fanout",type="PostCreated"}`)
			}
			for deadline := time.Now().Add(10 * time.Second); fannedOut() != "2" || len(feed(alice)) != 2; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("alice's feed never held both posts: %v (fan-outs done: %s)", feed(alice), fannedOut())
				}
			}
			if st, _ := call(t, "DELETE", srv.url+"/v1/posts/"+p1["id"].(string), bob, ""); st != 204 {
				t.Fatalf("delete = %d", st)
			}
			if items := feed(alice); len(items) != 1 || items[0].(map[string]any)["id"] != p2["id"] {
				t.Fatalf("alice's feed right after the delete = %v", items)
			}
			// What the embedded store's engine wrote is exported (docs/table.md).
			for _, kind := range []string{"wal", "flush", "compaction"} {
				m := `rookery_engine_written_bytes_total{kind="` + kind + `"}`
				if v, err := strconv.ParseFloat(metricOf(t, srv.url, m), 64); err != nil || kind == "wal" && v <= 0 {
					t.Errorf("%s = %v, %v", m, v, err)
				}
			}
			if v, err := strconv.ParseFloat(metricOf(t, srv.url, "rookery_engine_wal_sync_seconds_count"), 64); err != nil || v <= 0 {
				t.Errorf("rookery_engine_wal_sync_seconds_count = %v, %v", v, err)
			}
		})
	}
}

// metricOf returns the value of the series named (with its labels) in the server's /metrics, or
// "none".
func metricOf(t *testing.T, url, series string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return "none"
}

// TestImportGraph loads a small SNAP graph and a small DeathStarBench graph through a running
// server's API, twice (importing again is harmless), and checks the follows.
func TestImportGraph(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir)
	snap := filepath.Join(dir, "g.txt")
	os.WriteFile(snap, []byte("# a follows b\n10\t20\n20\t30\n10\t30\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "d.nodes"), []byte("3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "d.edges"), []byte("0 1\n1 2\n"), 0o644)
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	follows := func(a, b string) bool {
		st, body := call(t, "GET", srv.url+"/v1/users/"+a+"/following/"+b, tok, "")
		if st != 200 && st != 404 {
			t.Fatalf("follow status %s -> %s = %d %v", a, b, st, body)
		}
		return st == 200
	}
	for range 2 {
		command(t, nil, "import", "graph", snap, "--server", srv.url, "--data-dir", dir, "--prefix", "s", "--concurrency", "4")
		command(t, nil, "import", "graph", filepath.Join(dir, "d.edges"), "--symmetric", "--server", srv.url, "--data-dir", dir, "--prefix", "d")
	}
	// SNAP ids 10, 20, 30 are s0, s1, s2.
	if !follows("s0", "s1") || !follows("s1", "s2") || !follows("s0", "s2") || follows("s1", "s0") {
		t.Fatal("the SNAP graph's follows are wrong")
	}
	if !follows("d0", "d1") || !follows("d1", "d0") || !follows("d2", "d1") || follows("d0", "d2") {
		t.Fatal("the DeathStarBench graph's follows are wrong")
	}
	if st, body := call(t, "GET", srv.url+"/v1/users/s0", tok, ""); st != 200 || body["username"] != "s_0" {
		t.Fatalf("imported user = %d %v", st, body)
	}
	err := run(context.Background(), []string{"import", "graph", filepath.Join(dir, "missing.txt"), "--server", srv.url, "--data-dir", dir}, env(nil), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("importing a missing file succeeded")
	}
}

// TestBenchCommand runs the harness for a few seconds on a tiny graph against a running server
// (import included), as CI does to prove it works; it asserts no timings.
func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir)
	g := filepath.Join(dir, "tiny.txt")
	os.WriteFile(g, []byte("0 1\n1 2\n2 0\n3 0\n3 1\n4 0\n"), 0o644)
	out := filepath.Join(dir, "result.json")
	table := command(t, nil, "bench", "--graph", g, "--import", "--server", srv.url, "--data-dir", dir,
		"--rate", "40", "--duration", "2s", "--lag-sample", "1", "--out", out, "--users", "zipf")
	for _, want := range []string{"feed", "post", "user", "p99.9 ms", "achieved", "ms per request", "peak RSS"} {
		if !strings.Contains(table, want) {
			t.Fatalf("the table has no %q:\n%s", want, table)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []struct {
			Requests  int     `json:"requests"`
			ErrorRate float64 `json:"error_rate"`
			Ops       map[string]struct {
				Count  int            `json:"count"`
				Errors map[string]int `json:"errors"`
			} `json:"ops"`
			Server *bench.ServerUsage `json:"server"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.Results) != 1 {
		t.Fatalf("result.json: %v\n%s", err, b)
	}
	r := res.Results[0]
	if r.Requests < 20 || r.ErrorRate != 0 || r.Ops["feed"].Count == 0 || len(r.Ops["feed"].Errors) != 0 {
		t.Fatalf("results: %s", b)
	}
	// The server's own figures: CPU (the test binary serves, so some), memory, and catching up.
	if u := r.Server; u == nil || u.CPUSeconds <= 0 || u.CPUPerRequestMs <= 0 || u.PeakRSSMiB <= 0 || u.CaughtUpS < 0 {
		t.Fatalf("the server's usage: %+v\n%s", u, b)
	}
	// Its engine's log syncs (the posts' writes are synced): how many, and the slowest's bound.
	if u := r.Server; u.WALSyncs <= 0 || u.WALSlowMs <= 0 || u.WALSyncMaxMs <= 0 || !strings.Contains(table, "synced its log") {
		t.Fatalf("the server's log syncs: %+v\n%s", u, table)
	}
	if rep := command(t, nil, "bench", "report", out, out); !strings.Contains(rep, "1.00x") || !strings.Contains(rep, "feed") {
		t.Fatalf("report:\n%s", rep)
	}
	// The disk probe: one line, and its figures for the headline.
	diskOut := filepath.Join(dir, "disk.json")
	if line := command(t, nil, "bench", "disk", "--dir", dir, "--duration", "200ms", "--out", diskOut); !strings.Contains(line, "syncs of 4 KiB writes") {
		t.Fatalf("bench disk: %s", line)
	}
	if b, err := os.ReadFile(diskOut); err != nil || !strings.Contains(string(b), `"p99_ms"`) {
		t.Fatalf("bench disk --out: %s, %v", b, err)
	}
	// A sweep whose every step passes has not reached the knee. (--min-samples 0: the default 500
	// would stretch each step to 500 posts, four minutes at this rate.)
	sw := command(t, nil, "bench", "--graph", g, "--server", srv.url, "--data-dir", dir,
		"--rate", "20", "--duration", "500ms", "--sweep", "--steps", "2", "--p99-bound", "1m", "--min-samples", "0")
	if !strings.Contains(sw, "knee: not reached (every step passed, up to 24/s") {
		t.Fatalf("sweep:\n%s", sw)
	}
}

// TestEngagementEndToEnd runs the binary with the analytics export on and the cache in Redis: an
// activity and a post through the API, the streak, `rookery streaks repair` against the server,
// and every event in the Parquet files.
func TestEngagementEndToEnd(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--export-dir", "export", "--export-roll-age", "100ms",
		"--cache", "redis", "--redis-addr", testenv.RedisAddr(), "--redis-prefix", redisPrefix(t))
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "dana", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/dana", tok, `{"username":"dana","timezone":"Asia/Kolkata"}`); st != 201 {
		t.Fatalf("PUT user = %d %v", st, body)
	}
	st, body := call(t, "POST", srv.url+"/v1/activities", tok, `{"type":"daily_open","idempotency_key":"k1"}`)
	if st != 201 || body["streak"].(map[string]any)["current_streak"] != float64(1) {
		t.Fatalf("POST /v1/activities = %d %v", st, body)
	}
	if st, body := call(t, "POST", srv.url+"/v1/posts", tok, `{"text":"hello"}`); st != 201 {
		t.Fatalf("POST /v1/posts = %d %v", st, body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, s := call(t, "GET", srv.url+"/v1/users/dana/streak", tok, "")
		if s["total_points"] == float64(15) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the post never counted as an activity: %v", s)
		}
	}
	from := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	out := command(t, nil, "streaks", "repair", "--server", srv.url, "--data-dir", dir, "--from", from, "--to", to)
	if !strings.Contains(out, "checked 1 streaks") {
		t.Fatalf("streaks repair printed %q", out)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rows, err := export.ReadDir(filepath.Join(dir, "export"))
		if err != nil {
			t.Fatal(err)
		}
		types := map[string]int{}
		for _, r := range rows {
			types[r.Type]++
		}
		if types["ActivityRecorded"] == 2 && types["PostCreated"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the export holds %v; want 2 ActivityRecorded and a PostCreated", types)
		}
	}
}

// TestScaleOutEndToEnd runs the README's scale-out: two API nodes and a worker over DynamoDB
// Local, NATS JetStream, Redis timelines and the Redis cache. Writes go to one API node and reads
// to the other; the worker fans out, counts, scores and records activities.
func TestScaleOutEndToEnd(t *testing.T) {
	vars := scaleOutVars(t, "rookery-scale")
	vars["ROOKERY_LEADERBOARD_CACHE"] = "0s"
	writer := start(t, vars, "--data-dir", t.TempDir(), "--role", "api")
	reader := start(t, vars, "--data-dir", t.TempDir(), "--role", "api")
	// Two workers split the consumer groups' partitions (leases of 2 s, given by flag to one and by
	// environment to both).
	vars["ROOKERY_NATS_LEASE_TTL"] = "2s"
	start(t, vars, "--data-dir", t.TempDir(), "--role", "worker")
	start(t, vars, "--data-dir", t.TempDir(), "--role", "worker", "--nats-lease-ttl", "2s")
	tok := func(sub string) string { return strings.TrimSpace(command(t, vars, "token", "--sub", sub)) }
	ann, bob := tok("ann"), tok("bob")
	for u, tk := range map[string]string{"ann": ann, "bob": bob} {
		if st, body := call(t, "PUT", writer.url+"/v1/users/"+u, tk, `{"username":"`+u+`"}`); st != 201 {
			t.Fatalf("PUT %s = %d %v", u, st, body)
		}
	}
	if st, body := call(t, "GET", reader.url+"/v1/feed", bob, ""); st != 200 {
		t.Fatalf("bob's first feed = %d %v", st, body)
	}
	if st, body := call(t, "PUT", writer.url+"/v1/users/bob/following/ann", bob, ""); st != 200 {
		t.Fatalf("follow = %d %v", st, body)
	}
	st, post := call(t, "POST", writer.url+"/v1/posts", ann, `{"text":"scaled out"}`)
	if st != 201 {
		t.Fatalf("post = %d %v", st, post)
	}
	if st, body := call(t, "PUT", writer.url+"/v1/posts/"+post["id"].(string)+"/likes/bob", bob, ""); st != 200 {
		t.Fatalf("like = %d %v", st, body)
	}
	st, act := call(t, "POST", writer.url+"/v1/activities", ann, `{"type":"daily_open","idempotency_key":"open"}`)
	if st != 201 {
		t.Fatalf("activity = %d %v", st, act)
	}
	// Through the other node: the feed (fanned out by the worker), the streak (the post counted by
	// the worker as an activity, seen through the shared cache), the counts and the authors board.
	eventually := func(what string, ok func() (bool, any)) {
		t.Helper()
		var last any
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var done bool
			if done, last = ok(); done {
				return
			}
		}
		t.Fatalf("%s never held; last: %v", what, last)
	}
	eventually("bob's feed holds ann's post", func() (bool, any) {
		_, body := call(t, "GET", reader.url+"/v1/feed", bob, "")
		items, _ := body["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["id"] == post["id"], body
	})
	eventually("ann's streak counts the open and the post", func() (bool, any) {
		_, body := call(t, "GET", reader.url+"/v1/users/ann/streak", bob, "")
		return body["total_points"] == float64(15) && body["current_streak"] == float64(1), body
	})
	eventually("ann's follower count", func() (bool, any) {
		_, body := call(t, "GET", reader.url+"/v1/users/ann", bob, "")
		return body["follower_count"] == float64(1), body
	})
	eventually("the authors board", func() (bool, any) {
		_, body := call(t, "GET", reader.url+"/v1/leaderboards/authors", bob, "")
		items, _ := body["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["score"] == float64(11), body
	})
	if st, body := call(t, "GET", reader.url+"/readyz", "", ""); st != 200 {
		t.Fatalf("readyz = %d %v", st, body)
	}
}

// scaleOutVars returns the environment of a scale-out deployment for one test: a new DynamoDB
// table (migrated) named from name, the NATS event log (2 partitions) and Redis timelines, cache
// and limits under a prefix of the test's own, all removed when the test ends.
func scaleOutVars(t *testing.T, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	natsURL := testenv.NATSURL()
	name, prefix := fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), redisPrefix(t)
	vars := map[string]string{
		"ROOKERY_STORE": "dynamo", "ROOKERY_DYNAMO_ENDPOINT": dynamotest.Endpoint(t), "ROOKERY_DYNAMO_TABLE": name,
		"ROOKERY_DYNAMO_REGION": "us-east-1", "ROOKERY_AWS_ACCESS_KEY_ID": "test", "ROOKERY_AWS_SECRET_ACCESS_KEY": "test",
		"ROOKERY_AUTH_SECRET": strings.Repeat("s", 32),
		"ROOKERY_EVENTS":      "nats", "ROOKERY_NATS_URL": natsURL, "ROOKERY_NATS_PREFIX": prefix, "ROOKERY_EVENT_PARTITIONS": "2",
		"ROOKERY_TIMELINES": "redis", "ROOKERY_CACHE": "redis", "ROOKERY_REDIS_PREFIX": prefix, "ROOKERY_REDIS_ADDR": testenv.RedisAddr(),
	}
	command(t, vars, "migrate")
	t.Cleanup(func() { dynamo.DropTable(ctx, dynamotest.Client(t), name) })
	t.Cleanup(func() {
		if l, err := natslog.Open(ctx, natslog.Options{URL: natsURL, Prefix: prefix, Partitions: 2}); err == nil {
			l.Destroy(ctx)
			l.Close()
		}
	})
	return vars
}

// redisPrefix returns a prefix of Redis keys for one test; the test's keys (timelines, cache, rate
// limits) are deleted when it ends.
func redisPrefix(t *testing.T) string {
	t.Helper()
	prefix := fmt.Sprintf("rookerye2e_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		client := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr()})
		defer client.Close()
		ctx := context.Background()
		if err := tlredis.New(client, tlredis.Options{Prefix: prefix}).Drop(ctx); err != nil {
			t.Errorf("cleaning up Redis timelines: %v", err)
		}
		if err := cacheredis.New(client, prefix).Drop(ctx); err != nil {
			t.Errorf("cleaning up the Redis cache: %v", err)
		}
		if err := rlredis.New(client, prefix+":rl").Drop(ctx, client); err != nil {
			t.Errorf("cleaning up the Redis rate limits: %v", err)
		}
	})
	return prefix
}

// TestSchemaHasTheTimelineIndex: app.Schema, the one cmd migrates and opens, holds the index
// table-backed timelines need, exactly as they name it.
func TestSchemaHasTheTimelineIndex(t *testing.T) {
	ix, ok := app.Schema.Index(tablestore.Index.Name)
	if !ok || !reflect.DeepEqual(ix, tablestore.Index) {
		t.Fatalf("app.Schema's %s = %+v, %v; tablestore needs %+v", tablestore.Index.Name, ix, ok, tablestore.Index)
	}
}

// TestBenchFront serves a baseline behind `rookery bench front` and runs the harness against it as
// against Rookery: tokens are checked, feeds come back as hydrated posts, and the server line reads
// the front's /metrics.
func TestBenchFront(t *testing.T) {
	dir := t.TempDir()
	secret := "front-secret-front-secret-front-secret"
	g := filepath.Join(dir, "tiny.txt")
	os.WriteFile(g, []byte("0 1\n1 2\n2 0\n3 0\n3 1\n4 0\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"bench", "front", "--target", "redis-list", "--graph", g, "--addr", "127.0.0.1:0",
			"--baseline-redis-addr", testenv.RedisAddr(), "--baseline-name", redisPrefix(t), "--auth-secret", secret}, env(nil), io.Discard, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bench front returned %v", err)
		}
	})
	lines := bufio.NewReader(pr)
	var url string
	for url == "" {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("bench front did not start: %v", err)
		}
		if _, rest, ok := strings.Cut(line, " at http://"); ok {
			url = "http://" + strings.TrimSpace(rest)
		}
	}
	go io.Copy(io.Discard, lines)

	if st, _ := call(t, "GET", url+"/v1/feed", "not-a-token", ""); st != 401 {
		t.Fatalf("a bad token: %d", st)
	}
	user := strings.TrimSpace(command(t, nil, "token", "--sub", "g1", "--auth-secret", secret))
	if st, body := call(t, "POST", url+"/v1/posts", user, `{"text":"hello"}`); st != 201 || body["id"] == "" {
		t.Fatalf("post = %d %v", st, body)
	}
	follower := strings.TrimSpace(command(t, nil, "token", "--sub", "g0", "--auth-secret", secret))
	st, body := call(t, "GET", url+"/v1/feed?limit=5", follower, "")
	items, _ := body["items"].([]any)
	if st != 200 || len(items) != 1 {
		t.Fatalf("feed = %d %v", st, body)
	}
	post := items[0].(map[string]any)
	if post["text"] != "hello" || post["author"].(map[string]any)["id"] != "g1" || post["author"].(map[string]any)["username"] != "u1" || post["liked_by_me"] != false || post["like_count"] != float64(0) {
		t.Fatalf("the feed's post: %v", post)
	}

	table := command(t, nil, "bench", "--graph", g, "--server", url, "--auth-secret", secret, "--rate", "40", "--duration", "1s", "--lag-sample", "1")
	for _, want := range []string{"feed", "post", "fanout_lag", "ms per request", "0.00% errors"} {
		if !strings.Contains(table, want) {
			t.Fatalf("the table has no %q:\n%s", want, table)
		}
	}
}
