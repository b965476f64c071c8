package web_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rookery/rookery/auth"
)

// TestDemoInABrowser drives the demo client in headless Chromium (Debian's chromium; scripts/test.sh
// installs it where it is missing): two users in two browser contexts against `rookery serve
// --demo`. One follows the other, scrolls the feed to its first post, sees a new post arrive without
// a reload, and likes it; the author's unread badge counts the like, and the author's edit of it
// shows in its place. A follow's older posts arrive live where the feed orders them, and an
// unfollow takes the author's posts off the page. Screenshots
// of both pages are kept when it fails.
func TestDemoInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs chromium on PATH (apt-get install chromium; scripts/test.sh installs it): %v", err)
	}
	base, secret := serveDemo(t, "127.0.0.1:0")

	// ann has 25 posts already, made through the API, and cy one older than all of them.
	annTok, _ := auth.Mint(secret, "ann", false, time.Hour, time.Now())
	bobTok, _ := auth.Mint(secret, "bob", false, time.Hour, time.Now())
	cyTok, _ := auth.Mint(secret, "cy", false, time.Hour, time.Now())
	call(t, "POST", base+"/demo/session", "", `{"user":"cy"}`)
	call(t, "POST", base+"/v1/posts", cyTok, `{"text":"cy before everyone"}`)
	call(t, "POST", base+"/demo/session", "", `{"user":"ann"}`)
	for i := range 25 {
		call(t, "POST", base+"/v1/posts", annTok, fmt.Sprintf(`{"text":"old post %02d"}`, i))
	}

	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1000, 700))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if _, err := chromedp.Run(browser, chromedp.Title()); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	// A context per user (a browser context each: separate storage), without a timeout: the first
	// Run on a context makes its tab, which lives as long as that Run's context.
	ann, cancelA := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancelA()
	bob, cancelB := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancelB()
	for _, c := range []context.Context{ann, bob} {
		if _, err := chromedp.Run(c, chromedp.Title()); err != nil {
			t.Fatal(err)
		}
	}
	// What the pages print as errors (an uncaught exception, console.error), to tell when it fails.
	var pageErrs struct {
		sync.Mutex
		lines []string
	}
	pages := map[string]context.Context{"ann": ann, "bob": bob}
	for name, c := range pages {
		must(t, "listen to "+name+"'s page", chromedp.Listen(c, func(ev any) {
			var line string
			switch ev := ev.(type) {
			case *cdpruntime.EventExceptionThrown:
				line = ev.ExceptionDetails.Text
				if x := ev.ExceptionDetails.Exception; x != nil {
					line += " " + x.Description
				}
			case *cdpruntime.EventConsoleAPICalled:
				if ev.Type != cdpruntime.ConsoleAPICalledTypeError {
					return
				}
				for _, a := range ev.Args {
					line += " " + cmp.Or(a.Description, string(a.Value))
				}
			default:
				return
			}
			pageErrs.Lock()
			pageErrs.lines = append(pageErrs.lines, name+":"+line)
			pageErrs.Unlock()
		}))
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		pageErrs.Lock()
		for _, l := range pageErrs.lines {
			t.Logf("page error: %s", l)
		}
		pageErrs.Unlock()
		dir, _ := os.MkdirTemp("", "rookery-web-failure-")
		for name, c := range pages {
			sctx, cancel := context.WithTimeout(c, 10*time.Second)
			if png, err := chromedp.Run(sctx, chromedp.FullScreenshot(90)); err == nil {
				os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
			}
			cancel()
		}
		t.Logf("screenshots of the pages are in %s", dir)
	})

	signIn := func(c context.Context, user string) {
		t.Helper()
		must(t, "sign in as "+user, chromedp.Do(within(t, c),
			chromedp.Navigate(base+"/demo/"),
			chromedp.WaitVisible(chromedp.ID("signin-user")),
			chromedp.SendKeys(chromedp.ID("signin-user"), user),
			chromedp.Click(chromedp.CSS(`#signin-form button`)), // Submit would skip the form's handler
			chromedp.WaitVisible(chromedp.ID("app"))))
	}
	signIn(ann, "ann")
	signIn(bob, "bob")

	// bob follows ann from her profile.
	must(t, "follow from the profile", chromedp.Do(within(t, bob),
		chromedp.Click(chromedp.CSS(`a[data-view="profile"]`)),
		chromedp.SendKeys(chromedp.ID("profile-user"), "ann"),
		chromedp.Click(chromedp.CSS(`#profile-form button`)),
		chromedp.Click(chromedp.CSS(`button[data-action="Follow"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="Unfollow"]`))))

	// bob's feed, scrolled to its first post (infinite scroll).
	signIn(bob, "bob")
	var posts int
	var end string
	for deadline := time.Now().Add(30 * time.Second); ; {
		must(t, "scroll", chromedp.Do(within(t, bob), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.scrollTo(0, document.body.scrollHeight)`))
			return err
		}), chromedp.Sleep(200*time.Millisecond)))
		var err error
		if posts, err = chromedp.Run(within(t, bob), chromedp.Evaluate[int](`document.querySelectorAll("#feed .post").length`)); err == nil {
			end, err = chromedp.Run(within(t, bob), chromedp.Text(chromedp.ID("feed-end")))
		}
		must(t, "read the feed", err)
		if posts == 25 && strings.Contains(end, "first post") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's feed shows %d posts, end %q; want 25 and the first post", posts, end)
		}
	}
	first, err := chromedp.Run(within(t, bob), chromedp.Evaluate[string](`[...document.querySelectorAll("#feed .post .text")].at(-1).textContent`))
	must(t, "the last post shown", err)
	if first != "old post 00" {
		t.Fatalf("the feed ends with %q; want old post 00", first)
	}

	// ann posts in her browser; bob's page shows it without a reload.
	must(t, "compose", chromedp.Do(within(t, ann),
		chromedp.SendKeys(chromedp.ID("compose-text"), "hello live #demo"),
		chromedp.Click(chromedp.CSS(`#compose button`))))
	live := `//ol[@id="feed"]/li[contains(@class,"post")][div[@class="text" and .="hello live #demo"]]`
	must(t, "the new post arrives in bob's feed", chromedp.Do(within(t, bob), chromedp.WaitVisible(chromedp.Search(live))))

	// bob likes it; ann's unread badge counts the follow and the like.
	must(t, "like", chromedp.Do(within(t, bob), chromedp.Click(chromedp.Search(live+`//button[contains(@class,"like")]`))))
	var badge string
	for deadline := time.Now().Add(20 * time.Second); badge != "2"; time.Sleep(200 * time.Millisecond) {
		badge, err = chromedp.Run(within(t, ann), chromedp.Text(chromedp.ID("badge")))
		must(t, "read the badge", err)
		if time.Now().After(deadline) {
			t.Fatalf("ann's unread badge shows %q; want 2 (bob's follow and like)", badge)
		}
	}

	// ann edits it: bob's page shows the new text in its place, without a reload.
	id, err := chromedp.Run(within(t, bob), chromedp.Evaluate[string](`[...document.querySelectorAll("#feed .post")].find((li) => li.querySelector(".text").textContent === "hello live #demo").dataset.post`))
	must(t, "the new post's id", err)
	call(t, "PATCH", base+"/v1/posts/"+id, annTok, `{"text":"hello edited #demo"}`)
	waitFeed(t, bob, "the edit shown", `(() => { const t = [...document.querySelectorAll("#feed .post .text")].map((e) => e.textContent);
		return t.length === 26 && t[0] === "hello edited #demo"; })()`)

	// bob follows cy: her post, older than all of ann's, arrives live at the feed's end, where the
	// feed orders it (not on top). Then bob unfollows ann: her posts leave his page without a reload.
	call(t, "PUT", base+"/v1/users/bob/following/cy", bobTok, "")
	waitFeed(t, bob, "cy's post at the end", `(() => { const t = [...document.querySelectorAll("#feed .post .text")].map((e) => e.textContent);
		return t.length === 27 && t[0] === "hello edited #demo" && t.at(-1) === "cy before everyone"; })()`)
	call(t, "DELETE", base+"/v1/users/bob/following/ann", bobTok, "")
	waitFeed(t, bob, "ann's posts gone", `(() => { const t = [...document.querySelectorAll("#feed .post .text")].map((e) => e.textContent);
		return t.length === 1 && t[0] === "cy before everyone"; })()`)
}

// waitFeed waits until the expression, about the page, is true.
func waitFeed(t *testing.T, page context.Context, what, expr string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ok, err := chromedp.Run(within(t, page), chromedp.Evaluate[bool](expr))
		must(t, what, err)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			texts, _ := chromedp.Run(within(t, page), chromedp.Evaluate[[]string](`[...document.querySelectorAll("#feed .post .text")].map((e) => e.textContent)`))
			t.Fatalf("%s: not within 20 s; the feed shows %q", what, texts)
		}
	}
}

// within returns c with a deadline for one step (c has run once: its tab outlives the step).
func within(t *testing.T, c context.Context) context.Context {
	ctx, cancel := context.WithTimeout(c, 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// serveDemo builds the binary and starts `rookery serve --demo` on addr (port 0: a free one) with
// the extra arguments; it returns the base URL and the secret.
func serveDemo(t *testing.T, addr string, args ...string) (string, []byte) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "rookery")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rookery")
	build.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret := []byte("web-test-secret-web-test-secret-0123456789")
	cmd := exec.Command(bin, append([]string{"serve", "--demo", "--addr", addr, "--data-dir", t.TempDir(), "--log-level", "error"}, args...)...)
	cmd.Env = append(os.Environ(), "ROOKERY_AUTH_SECRET="+string(secret))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	buf := make([]byte, 512)
	n, _ := out.Read(buf)
	_, rest, ok := strings.Cut(string(buf[:n]), "listening on ")
	if !ok {
		t.Fatalf("rookery serve printed %q", buf[:n])
	}
	go io.Copy(io.Discard, out)
	return strings.Fields(rest)[0], secret
}

func call(t *testing.T, method, url, tok, body string) {
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
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s = %d %s", method, url, resp.StatusCode, b)
	}
}

// TestCrossOriginInABrowser calls the API from a page of another origin, as a browser app served
// from its own site does: the server allows http://localhost:<port> (--cors-origins), and a page
// from there reads a reply with its rate-limit fields (a preflight for the Authorization header)
// and opens a stream with a ticket. A page of an origin not allowed (http://127.0.0.1:<port>)
// cannot read replies.
func TestCrossOriginInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs chromium on PATH (apt-get install chromium; scripts/test.sh installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	allowed, other := fmt.Sprintf("http://localhost:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port)
	_, secret := serveDemo(t, fmt.Sprintf("127.0.0.1:%d", port), "--cors-origins", allowed)
	tok, _ := auth.Mint(secret, "ann", false, time.Hour, time.Now())
	call(t, "POST", other+"/demo/session", "", `{"user":"ann"}`)

	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox)...)
	defer cancel()
	page, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if _, err := chromedp.Run(page, chromedp.Title()); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	// Each script runs in a page of one origin against the API at the other; it reports what the
	// page could read, or the error that kept it from reading.
	fetchFrom := func(pageOrigin, api string) string {
		t.Helper()
		must(t, "open a page of "+pageOrigin, chromedp.Do(within(t, page), chromedp.Navigate(pageOrigin+"/demo/")))
		got, err := chromedp.Run(within(t, page), chromedp.Evaluate[string](fmt.Sprintf(`(async () => {
			try {
				const r = await fetch(%[1]q + "/v1/users/ann", { headers: { Authorization: "Bearer %[2]s" } });
				const u = await r.json();
				return r.status + " " + u.username + " remaining=" + r.headers.get("X-RateLimit-Remaining");
			} catch (e) { return "error: " + e.message; }
		})()`, api, tok), chromedp.EvalAwaitPromise))
		must(t, "fetch from "+pageOrigin, err)
		return got
	}
	if got := fetchFrom(allowed, other); !strings.HasPrefix(got, "200 ann remaining=") || strings.HasSuffix(got, "=null") {
		t.Fatalf("a page of the allowed origin read %q; want 200 ann with its rate-limit field", got)
	}
	if got := fetchFrom(other, allowed); !strings.HasPrefix(got, "error:") {
		t.Fatalf("a page of an origin not allowed read %q; want a failed fetch", got)
	}
	// A stream, opened cross-origin with a ticket (EventSource cannot send a token).
	must(t, "open a page of "+allowed, chromedp.Do(within(t, page), chromedp.Navigate(allowed+"/demo/")))
	opened, err := chromedp.Run(within(t, page), chromedp.Evaluate[string](fmt.Sprintf(`(async () => {
		const r = await fetch(%[1]q + "/v1/stream/tickets", { method: "POST", headers: { Authorization: "Bearer %[2]s" } });
		const { ticket } = await r.json();
		return await new Promise((resolve) => {
			const es = new EventSource(%[1]q + "/v1/stream?ticket=" + encodeURIComponent(ticket));
			es.onopen = () => { es.close(); resolve("open"); };
			es.onerror = () => { es.close(); resolve("error"); };
		});
	})()`, other, tok), chromedp.EvalAwaitPromise))
	must(t, "open a stream", err)
	if opened != "open" {
		t.Fatalf("the cross-origin stream: %s; want it open", opened)
	}
}
