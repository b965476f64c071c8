package app_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/app"
)

// TestFeedPagesRacingWrites: the store's only writer keeps feed pages while writes commit. A read
// that lands between a write's commit and the set of what the process keeps of it (a post's or an
// author's copy) reads the old copy; the page it makes must not be served after the write
// returned. Another reader's reads of the same page race every edit and rename; after each one
// returns, a read shows it; so does one after a post's deletion, and after a new post's fan-out.
// Pages kept must also be served: most of the racing reads are.
func TestFeedPagesRacingWrites(t *testing.T) {
	var hits, misses atomic.Int64
	a, pipeline := readerWorld(t, backends["pebble"](t), app.Deps{PostCacheTTL: time.Hour, SoleWriter: true,
		FollowerCacheIDs: 1_000_000, FeedPages: app.DefaultFeedPages, OnFeedPageRead: func(hit bool) {
			if hit {
				hits.Add(1)
			} else {
				misses.Add(1)
			}
		}})
	if _, _, err := a.PutUser(server, "author", app.UserInput{Username: "author"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Follow(server, "reader", "author"); err != nil {
		t.Fatal(err)
	}
	var ids []string                // the posts, oldest first
	authorOf := map[string]string{} // by post
	for i := range 5 {
		p, _, err := a.CreatePost(as("author"), app.PostInput{Text: fmt.Sprintf("post %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids, authorOf[p.ID] = append(ids, p.ID), "author"
	}
	pipeline.Drain(t, 30*time.Second)

	// Pages of 3, which the reader's timeline fills: a page that pulls depends on everyone the
	// reader follows, one read from the timeline only on what it shows (and the timeline).
	const page = 3
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var draining atomic.Bool // the racing reads wait while the pipeline drains: they race writes
	drain := func() {
		draining.Store(true)
		defer draining.Store(false)
		pipeline.Drain(t, 30*time.Second)
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if draining.Load() {
				time.Sleep(time.Millisecond)
				continue
			}
			if _, err := a.Feed(as("reader"), "", page); err != nil {
				t.Error(err)
				return
			}
		}
	})
	stopReader := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopReader() // a failed step's
	for step := range 300 {
		text, name := fmt.Sprintf("edited at %d", step), fmt.Sprintf("author at %d", step)
		id := ids[len(ids)-1-step%page]
		switch step % 4 {
		case 0:
			if _, err := a.EditPost(as(authorOf[id]), id, app.PostEdit{Text: &text}); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, _, err := a.PutUser(as("author"), "author", app.UserInput{Username: "author", DisplayName: &name}); err != nil {
				t.Fatal(err)
			}
		case 2: // by an author no page showed yet: shown once fanned out
			by := fmt.Sprintf("other%d", step)
			if _, _, err := a.PutUser(server, by, app.UserInput{Username: by}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Follow(server, "reader", by); err != nil {
				t.Fatal(err)
			}
			drain()
			p, _, err := a.CreatePost(as(by), app.PostInput{Text: fmt.Sprintf("post %d", len(ids))})
			if err != nil {
				t.Fatal(err)
			}
			ids, authorOf[p.ID] = append(ids, p.ID), by
			drain()
		case 3: // hidden at once, before the cleanup takes it out of the timeline
			if err := a.DeletePost(as(authorOf[id]), id); err != nil {
				t.Fatal(err)
			}
			ids = slices.DeleteFunc(ids, func(s string) bool { return s == id })
		}
		feed, err := a.Feed(as("reader"), "", page)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range feed.Items {
			got = append(got, p.ID)
			switch {
			case step%4 == 1 && p.Author.ID == "author" && p.Author.DisplayName != name:
				t.Fatalf("step %d: post %s shows its author as %q after the rename to %q", step, p.ID, p.Author.DisplayName, name)
			case step%4 == 0 && p.ID == id && p.Text != text:
				t.Fatalf("step %d: post %s shows %q after its edit to %q", step, p.ID, p.Text, text)
			}
		}
		want := slices.Clone(ids[max(0, len(ids)-page):])
		slices.Reverse(want) // newest first: ids are increasing
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: the feed shows %v; want %v", step, got, want)
		}
	}
	stopReader()
	if h, m := hits.Load(), misses.Load(); h < m {
		t.Fatalf("pages served %d times and made %d times; want most reads served", h, m)
	}
	t.Logf("pages served %d times, made %d times", hits.Load(), misses.Load())
}
