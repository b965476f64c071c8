// Package timelinetest is the conformance suite of timeline.Store: every backend runs Run.
package timelinetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/timeline"
)

// Config is what a backend's factory must honour.
type Config struct {
	Cap int // entries kept per timeline
}

// Factory opens an empty store configured as cfg says and registers its cleanup with t.
type Factory func(t testing.TB, cfg Config) timeline.Store

var ctx = context.Background()

const capacity = 30

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// entry n is post P<n> by author A<n%3>, at t0 + n seconds.
func entry(n int) timeline.Entry {
	return timeline.Entry{PostID: fmt.Sprintf("P%04d", n), AuthorID: fmt.Sprintf("A%d", n%3), At: t0.Add(time.Duration(n) * time.Second)}
}

// Run runs the suite; each test gets a fresh store with cap 30.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s timeline.Store)
	}{
		{"a missing timeline reads as missing and push does not create it", testMissing},
		{"entries page newest first, ties broken by post id", testOrder},
		{"push reaches many timelines at once and is idempotent", testPush},
		{"a timeline never shows more than the cap, newest kept", testCap},
		{"create replaces a timeline", testCreateReplaces},
		{"remove takes one entry, remove author all of theirs", testRemove},
		{"remove post takes it from every timeline that holds it", testRemovePost},
		{"paging while entries arrive neither repeats nor skips", testPagingWhilePushing},
		{"bad cursors and limits are invalid", testInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t, Config{Cap: capacity})) })
	}
}

func create(t *testing.T, s timeline.Store, user string, ns ...int) {
	t.Helper()
	var es []timeline.Entry
	for _, n := range ns {
		es = append(es, entry(n))
	}
	if err := s.Create(ctx, user, es); err != nil {
		t.Fatal(err)
	}
}

func push(t *testing.T, s timeline.Store, users []string, n int) {
	t.Helper()
	if err := s.Push(ctx, users, entry(n)); err != nil {
		t.Fatal(err)
	}
}

// all pages user's timeline to the end with page size limit and returns the post ids.
func all(t *testing.T, s timeline.Store, user string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 1000 {
		p, err := s.Page(ctx, user, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > limit {
			t.Fatalf("page of %d entries; limit %d", len(p.Entries), limit)
		}
		for _, e := range p.Entries {
			ids = append(ids, e.PostID)
		}
		if p.Next == "" {
			return ids
		}
		cursor = p.Next
	}
	t.Fatal("paging does not end")
	return nil
}

func ids(ns ...int) []string {
	var out []string
	for _, n := range ns {
		out = append(out, entry(n).PostID)
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v; want %v", what, got, want)
	}
}

func testMissing(t *testing.T, s timeline.Store) {
	p, err := s.Page(ctx, "ghost", "", 10)
	if err != nil || p.Exists || len(p.Entries) != 0 || p.Next != "" {
		t.Fatalf("page of a missing timeline = %+v, %v", p, err)
	}
	push(t, s, []string{"ghost"}, 1)
	if ok, err := s.Exists(ctx, "ghost"); err != nil || ok {
		t.Fatalf("Exists after a push to a missing timeline = %v, %v", ok, err)
	}
	create(t, s, "empty")
	p, err = s.Page(ctx, "empty", "", 10)
	if err != nil || !p.Exists || len(p.Entries) != 0 {
		t.Fatalf("page of an empty timeline = %+v, %v", p, err)
	}
	if ok, _ := s.Exists(ctx, "empty"); !ok {
		t.Fatal("an empty created timeline does not exist")
	}
}

func testOrder(t *testing.T, s timeline.Store) {
	create(t, s, "u", 5, 1, 9, 3, 7)
	// Two posts at the same millisecond: the larger id first.
	tie := timeline.Entry{PostID: "P0009b", AuthorID: "A0", At: entry(9).At}
	if err := s.Push(ctx, []string{"u"}, tie); err != nil {
		t.Fatal(err)
	}
	want := []string{"P0009b", "P0009", "P0007", "P0005", "P0003", "P0001"}
	for _, limit := range []int{1, 2, 4, 100} {
		same(t, fmt.Sprintf("limit %d", limit), all(t, s, "u", limit), want)
	}
	p, err := s.Page(ctx, "u", "", 1)
	if err != nil || len(p.Entries) != 1 {
		t.Fatal(err)
	}
	e := p.Entries[0]
	if e.AuthorID != "A0" || !e.At.Equal(entry(9).At) {
		t.Fatalf("entry = %+v", e)
	}
}

func testPush(t *testing.T, s timeline.Store) {
	users := []string{"a", "b", "c", "missing"}
	for _, u := range users[:3] {
		create(t, s, u)
	}
	for _, n := range []int{1, 2, 2, 3, 1} { // redelivered pushes
		push(t, s, users, n)
	}
	for _, u := range users[:3] {
		same(t, u, all(t, s, u, 10), ids(3, 2, 1))
	}
	if ok, _ := s.Exists(ctx, "missing"); ok {
		t.Fatal("push created a timeline")
	}
	// Many users at once.
	var many []string
	for i := range 250 {
		u := fmt.Sprintf("f%03d", i)
		many = append(many, u)
		create(t, s, u)
	}
	push(t, s, many, 10)
	for _, u := range []string{"f000", "f123", "f249"} {
		same(t, u, all(t, s, u, 10), ids(10))
	}
}

func testCap(t *testing.T, s timeline.Store) {
	var ns []int
	for n := range capacity + 20 {
		ns = append(ns, n)
	}
	create(t, s, "big", ns...)
	got := all(t, s, "big", 7)
	if len(got) != capacity || got[0] != entry(capacity+19).PostID || got[capacity-1] != entry(20).PostID {
		t.Fatalf("created with %d entries: %d shown, %v..%v", len(ns), len(got), got[0], got[len(got)-1])
	}
	for n := capacity + 20; n < capacity+60; n++ {
		push(t, s, []string{"big"}, n)
	}
	got = all(t, s, "big", 100)
	if len(got) != capacity || got[0] != entry(capacity+59).PostID || got[capacity-1] != entry(60).PostID {
		t.Fatalf("after pushes: %d shown, %v..%v", len(got), got[0], got[len(got)-1])
	}
}

func testCreateReplaces(t *testing.T, s timeline.Store) {
	create(t, s, "u", 1, 2, 3)
	create(t, s, "u", 7, 8)
	same(t, "after a second create", all(t, s, "u", 10), ids(8, 7))
}

func testRemove(t *testing.T, s timeline.Store) {
	create(t, s, "u", 1, 2, 3, 4, 5, 6, 7)
	if err := s.Remove(ctx, "u", entry(4).PostID); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "u", "P9999"); err != nil {
		t.Fatal(err)
	}
	same(t, "after remove", all(t, s, "u", 3), ids(7, 6, 5, 3, 2, 1))
	if err := s.RemoveAuthor(ctx, "u", "A1"); err != nil { // 1 and 7
		t.Fatal(err)
	}
	same(t, "after remove author", all(t, s, "u", 3), ids(6, 5, 3, 2))
}

func testRemovePost(t *testing.T, s timeline.Store) {
	var users []string
	for i := range 120 {
		u := fmt.Sprintf("r%03d", i)
		users = append(users, u)
		create(t, s, u, 1)
	}
	push(t, s, users, 2)
	push(t, s, users[:10], 3)
	if err := s.RemovePost(ctx, entry(2).PostID); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"r000", "r009", "r010", "r119"} {
		want := ids(1)
		if u < "r010" {
			want = ids(3, 1)
		}
		same(t, u, all(t, s, u, 10), want)
	}
	// Removing a post that no timeline holds is a success.
	if err := s.RemovePost(ctx, "P9999"); err != nil {
		t.Fatal(err)
	}
}

func testPagingWhilePushing(t *testing.T, s timeline.Store) {
	var ns []int
	for n := 100; n < 100+capacity; n++ {
		ns = append(ns, n)
	}
	create(t, s, "u", ns...)
	before := all(t, s, "u", 100)
	var pushed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1000; ; n++ { // newer entries arrive at the top
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Push(ctx, []string{"u"}, entry(n)); err != nil {
				t.Error(err)
				return
			}
			pushed.Add(1)
		}
	}()
	seen := map[string]bool{}
	cursor := ""
	for {
		p, err := s.Page(ctx, "u", cursor, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if seen[e.PostID] {
				t.Fatalf("%s repeated", e.PostID)
			}
			seen[e.PostID] = true
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
		// Read the next page only after another push, so paging and pushing interleave on every run.
		waitForMore(t, &pushed)
	}
	close(stop)
	wg.Wait()
	// What was on the first page's timeline and is still within the cap was seen. (The oldest
	// ones may have been trimmed away meanwhile, which the cap allows.)
	for _, id := range before[:10] {
		if !seen[id] {
			t.Fatalf("%s existed throughout but was skipped", id)
		}
	}
}

// waitForMore waits until n has grown (up to 10 s, which fails the test).
func waitForMore(t *testing.T, n *atomic.Int64) {
	t.Helper()
	before, deadline := n.Load(), time.Now().Add(10*time.Second)
	for n.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the concurrent writer made no progress")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func testInvalid(t *testing.T, s timeline.Store) {
	create(t, s, "u", 1, 2, 3)
	p, err := s.Page(ctx, "u", "", 1)
	if err != nil || p.Next == "" {
		t.Fatalf("page = %+v, %v", p, err)
	}
	for name, c := range map[string]string{
		"garbage":           "!!!",
		"truncated":         p.Next[:len(p.Next)/2],
		"another timeline":  "",
		"changed last char": p.Next[:len(p.Next)-1] + flip(p.Next[len(p.Next)-1]),
	} {
		user := "u"
		cursor := c
		if name == "another timeline" {
			create(t, s, "v", 1, 2)
			user, cursor = "v", p.Next
		}
		if _, err := s.Page(ctx, user, cursor, 1); !rookery.IsKind(err, rookery.Invalid) {
			t.Errorf("%s cursor: %v; want Invalid", name, err)
		}
	}
	for _, limit := range []int{0, 101} {
		if _, err := s.Page(ctx, "u", "", limit); !rookery.IsKind(err, rookery.Invalid) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}
