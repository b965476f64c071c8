package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/rookery/rookery"
)

// items pages a list route to its end as tok and returns every item.
func items(t *testing.T, base, path, tok string) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for {
		q := url.Values{"limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		st, body := call(t, "GET", base+path+"?"+q.Encode(), tok, "")
		if st != 200 {
			t.Fatalf("GET %s = %d %v", path, st, body)
		}
		for _, it := range body["items"].([]any) {
			all = append(all, it.(map[string]any))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// TestBackupUnderLoadAndRestore takes a backup of a running server while writers post and follow,
// restores it into a new data directory and starts a server there. Everything acknowledged before
// the backup began is in it, nothing is there that was never written, and the pipeline resumes:
// counts and home feeds come to agree with what the restored store holds (a model computed from
// it), and a new post reaches its followers' feeds.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	dir := t.TempDir()
	off := []string{"--rate-read", "off", "--rate-write", "off", "--rate-expensive", "off"}
	srv := start(t, nil, append([]string{"--data-dir", dir}, off...)...)
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	toks := map[string]string{}
	for _, u := range users {
		if st, body := call(t, "PUT", srv.url+"/v1/users/"+u, server, `{"username":"`+u+`_b"}`); st != 201 {
			t.Fatalf("PUT %s = %d %v", u, st, body)
		}
		toks[u] = strings.TrimSpace(command(t, nil, "token", "--sub", u, "--data-dir", dir))
	}

	// The writers: each acknowledged write with the time its reply came.
	type write struct {
		post, follower, followee string
		at                       time.Time
	}
	var mu sync.Mutex
	var writes []write
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, b := users[rng.IntN(len(users))], users[rng.IntN(len(users))]
				var wr write
				if rng.IntN(3) == 0 && a != b {
					if st, body := call(t, "PUT", srv.url+"/v1/users/"+a+"/following/"+b, toks[a], ""); st != 200 {
						t.Errorf("follow = %d %v", st, body)
						return
					}
					wr = write{follower: a, followee: b}
				} else {
					id := ulid.Make().String()
					if st, body := call(t, "POST", srv.url+"/v1/posts", toks[a], fmt.Sprintf(`{"id":%q,"text":"post by %s"}`, id, a)); st != 201 {
						t.Errorf("post = %d %v", st, body)
						return
					}
					wr = write{post: id, follower: a}
				}
				wr.at = time.Now()
				mu.Lock()
				writes = append(writes, wr)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	began := time.Now()
	out := command(t, nil, "backup", "--server", srv.url, "--data-dir", dir, "--name", "under-load")
	t.Logf("%s", strings.TrimSpace(out))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	srv.stop()
	if t.Failed() {
		return
	}
	var before, after int
	for _, w := range writes {
		if w.at.Before(began) {
			before++
		} else {
			after++
		}
	}
	t.Logf("%d writes acknowledged before the backup began, %d after", before, after)

	restored := filepath.Join(t.TempDir(), "restored")
	command(t, nil, "restore", "--from", filepath.Join(dir, "backups", "under-load"), "--data-dir", restored)
	srv = start(t, nil, append([]string{"--data-dir", restored}, off...)...)

	// What the restored store holds: every post and follow acknowledged before the backup, and
	// only what was written.
	written := map[string]bool{}
	for _, w := range writes {
		if w.post != "" {
			written[w.post] = true
		} else {
			written[w.follower+">"+w.followee] = true
		}
	}
	posts := map[string][]map[string]any{} // by author, newest first
	follows := map[string][]string{}       // by follower
	have := map[string]bool{}
	for _, u := range users {
		posts[u] = items(t, srv.url, "/v1/users/"+u+"/posts", toks[u])
		for _, p := range posts[u] {
			have[p["id"].(string)] = true
		}
		for _, f := range items(t, srv.url, "/v1/users/"+u+"/following", toks[u]) {
			v := f["user_id"].(string)
			follows[u] = append(follows[u], v)
			have[u+">"+v] = true
		}
	}
	for k := range have {
		if !written[k] {
			t.Errorf("the restored store holds %s, which no writer wrote", k)
		}
	}
	for _, w := range writes {
		k := w.post
		if k == "" {
			k = w.follower + ">" + w.followee
		}
		if w.at.Before(began) && !have[k] {
			t.Errorf("%s was acknowledged %v before the backup began and is not in it", k, began.Sub(w.at))
		}
	}

	// The pipeline resumes: counts and feeds come to agree with the restored store.
	feedOf := func(u string) []string {
		var all []map[string]any
		for _, a := range append(slices.Clone(follows[u]), u) {
			all = append(all, posts[a]...)
		}
		slices.SortFunc(all, func(x, y map[string]any) int {
			if c := strings.Compare(y["created_at"].(string), x["created_at"].(string)); c != 0 {
				return c
			}
			return strings.Compare(y["id"].(string), x["id"].(string))
		})
		var ids []string
		for _, p := range all {
			ids = append(ids, p["id"].(string))
		}
		return ids
	}
	followers := func(u string) int {
		n := 0
		for _, f := range follows {
			if slices.Contains(f, u) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range users {
		for {
			_, body := call(t, "GET", srv.url+"/v1/users/"+u, toks[u], "")
			var got []string
			for _, it := range items(t, srv.url, "/v1/feed", toks[u]) {
				got = append(got, it["id"].(string))
			}
			want := feedOf(u)
			if body["follower_count"] == float64(followers(u)) && slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the restore: follower_count %v (the store holds %d followers); feed of %d posts, the model's %d", u, body["follower_count"], followers(u), len(got), len(want))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A new post reaches a follower's feed.
	var reader, author string
	for u, f := range follows {
		if len(f) > 0 {
			reader, author = u, f[0]
			break
		}
	}
	if reader == "" {
		t.Fatal("no follow was restored")
	}
	st, post := call(t, "POST", srv.url+"/v1/posts", toks[author], `{"text":"after the restore"}`)
	if st != 201 {
		t.Fatalf("post after the restore = %d %v", st, post)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := call(t, "GET", srv.url+"/v1/feed?limit=1", toks[reader], "")
		if its, _ := body["items"].([]any); len(its) == 1 && its[0].(map[string]any)["id"] == post["id"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the post after the restore never reached %s's feed", reader)
		}
	}
	// Restoring again into the same, now non-empty, directory is refused.
	if err := run(t.Context(), []string{"restore", "--from", filepath.Join(dir, "backups", "under-load"), "--data-dir", restored}, env(nil), new(strings.Builder), new(strings.Builder)); err == nil {
		t.Fatal("restore into a non-empty directory succeeded")
	}
}

// TestBackupToS3: with --backup-dir s3://..., a backup is uploaded (backup.json last) and nothing
// stays behind locally; a second backup of the name is refused; restore --from s3://... brings the
// data directory back, secret included, and a server on it serves what was written.
func TestBackupToS3(t *testing.T) {
	endpoint := startS3Emulator(t, "vault")
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--backup-dir", "s3://vault/rookery/backups", "--s3-endpoint", endpoint)
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	ann := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/ann", server, `{"username":"ann_v"}`); st != 201 {
		t.Fatalf("PUT ann = %d %v", st, body)
	}
	st, post := call(t, "POST", srv.url+"/v1/posts", ann, `{"text":"kept in the vault"}`)
	if st != 201 {
		t.Fatalf("post = %d %v", st, post)
	}
	out := command(t, nil, "backup", "--server", srv.url, "--data-dir", dir, "--name", "nightly")
	if !strings.Contains(out, "in s3://vault/rookery/backups/nightly") {
		t.Fatalf("rookery backup printed %q", out)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "backups")); len(entries) != 0 {
		t.Fatalf("the backup's staging copy stayed behind: %v", entries)
	}
	// The route's reply, as docs/api.md has it: began_at in RFC 3339 UTC with milliseconds.
	st, info := call(t, "POST", srv.url+"/v1/admin/backup", server, `{"name":"direct"}`)
	began, _ := info["began_at"].(string)
	if _, err := time.Parse(rookery.TimeLayout, began); st != 201 || err != nil || len(began) != len("2026-11-22T10:04:05.123Z") ||
		info["name"] != "direct" || info["dir"] != "s3://vault/rookery/backups/direct" {
		t.Fatalf("POST /v1/admin/backup = %d %v", st, info)
	}
	err := run(t.Context(), []string{"backup", "--server", srv.url, "--data-dir", dir, "--name", "nightly"}, env(nil), new(strings.Builder), new(strings.Builder))
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a second backup named nightly: %v; want 409", err)
	}
	srv.stop()

	restored := filepath.Join(t.TempDir(), "restored")
	command(t, nil, "restore", "--from", "s3://vault/rookery/backups/nightly", "--s3-endpoint", endpoint, "--data-dir", restored)
	srv = start(t, nil, "--data-dir", restored)
	if st, body := call(t, "GET", srv.url+"/v1/posts/"+post["id"].(string), ann, ""); st != 200 || body["text"] != "kept in the vault" {
		t.Fatalf("the post after the restore = %d %v", st, body)
	}
	if err := run(t.Context(), []string{"restore", "--from", "s3://vault/rookery/backups/none", "--s3-endpoint", endpoint,
		"--data-dir", filepath.Join(t.TempDir(), "x")}, env(nil), new(strings.Builder), new(strings.Builder)); err == nil || !strings.Contains(err.Error(), "not a whole backup") {
		t.Fatalf("restoring a backup that is not there: %v", err)
	}
}

// TestBackupToASlowS3: a backup that takes longer than the server's read and write timeouts (here
// 1 s and 2 s; the S3 emulator answers each upload 300 ms late, as a distant bucket would) is
// taken, and `rookery backup` gets its reply.
func TestBackupToASlowS3(t *testing.T) {
	target, _ := url.Parse(startS3Emulator(t, "vault"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			time.Sleep(300 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--backup-dir", "s3://vault/backups", "--s3-endpoint", slow.URL,
		"--http-read-timeout", "1s", "--http-write-timeout", "2s")
	ann := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	if st, body := call(t, "PUT", srv.url+"/v1/users/ann", ann, `{"username":"ann_slow"}`); st != 201 {
		t.Fatalf("PUT ann = %d %v", st, body)
	}
	began := time.Now()
	var stderr strings.Builder
	var stdout strings.Builder
	if err := run(t.Context(), []string{"backup", "--server", srv.url, "--data-dir", dir, "--name", "slow"}, env(nil), &stdout, &stderr); err != nil {
		t.Fatalf("rookery backup after %v: %v", time.Since(began), err)
	}
	if took := time.Since(began); !strings.Contains(stdout.String(), "in s3://vault/backups/slow") || took < 2*time.Second {
		t.Fatalf("rookery backup printed %q after %v; want the backup, after more than the write timeout", stdout.String(), took)
	}
}
