// Package timelinetest is the conformance suite of timeline.Store: every backend runs Run.
package timelinetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/clocktest"
	"github.com/rookery/rookery/timeline"
)

// Config is what a backend's factory must honour: the cap, the TTL and the inactivity period, and
// the clock, which the suite moves on (a store's table, if it has one, must take it too).
type Config struct {
	timeline.Limits
	Clock rookery.Clock
}

// Factory opens an empty store configured as cfg says and registers its cleanup with t.
type Factory func(t testing.TB, cfg Config) timeline.Store

var ctx = context.Background()

const capacity = 30

// t0 is an hour ago, so that no entry is past its TTL however late the suite runs.
var t0 = time.Now().UTC().Truncate(time.Second).Add(-time.Hour)

// entry n is post P<n> by author A<n%3>, at t0 + n seconds.
func entry(n int) timeline.Entry {
	return timeline.Entry{PostID: fmt.Sprintf("P%04d", n), AuthorID: fmt.Sprintf("A%d", n%3), At: t0.Add(time.Duration(n) * time.Second)}
}

// Run runs the suite; each test gets a fresh store with cap 30 and a fake clock of its own, set to
// the time the test starts. Its inactivity test moves the clock on without waiting.
func Run(t *testing.T, open Factory) { run(t, open, false) }

// RunWallClockExpiry is Run for a store whose inactive timelines are expired by a server's own
// clock (Redis key expiry), which no fake clock moves: its inactivity test waits as it moves the
// fake clock on.
func RunWallClockExpiry(t *testing.T, open Factory) { run(t, open, true) }

func run(t *testing.T, open Factory, wallClockExpiry bool) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s timeline.Store)
	}{
		{"a missing timeline reads as missing and push does not create it", testMissing},
		{"entries page newest first, ties broken by post id", testOrder},
		{"push reaches many timelines at once and is idempotent", testPush},
		{"a timeline keeps the newest cap entries", testCap},
		{"an entry pushed late, below what the cap trimmed, leaves no hole", testLatePushBelowCap},
		{"create replaces a timeline", testCreateReplaces},
		{"remove takes one entry, remove author all of theirs", testRemove},
		{"remove post takes it from every timeline that holds it", testRemovePost},
		{"delete removes a timeline whole, and others keep theirs", testDelete},
		{"paging while entries arrive neither repeats nor skips", testPagingWhilePushing},
		{"complete publishes a build with what it pulled and what was pushed meanwhile", testBuild},
		{"a build that failed stays unread until a later build completes it", testFailedBuild},
		{"an entry pushed late, below the floor, is never shown", testLatePushBelowFloor},
		{"merge and complete add above the floor and trim to exactly the cap", testMergeTrims},
		{"drop older cuts a timeline below an entry, ties included, and raises its floor", testDropOlder},
		{"merge adds only above the floor, so the timeline stays complete above it", testMerge},
		{"merges racing pushes lose no push and leave no hole above the oldest entry", testMergeRacingPushes},
		{"bad users and limits are invalid", testInvalid},
	}
	config := func(l timeline.Limits) (Config, *clocktest.Clock) {
		clock := clocktest.New(time.Now().UTC())
		return Config{Limits: l, Clock: clock}, clock
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := config(timeline.Limits{Cap: capacity, InactiveAfter: time.Hour})
			tc.fn(t, open(t, cfg))
		})
	}
	t.Run("entries past their TTL are not shown", func(t *testing.T) {
		cfg, clock := config(timeline.Limits{Cap: capacity, TTL: 30 * time.Minute, InactiveAfter: time.Hour})
		testTTL(t, open(t, cfg), clock)
	})
	t.Run("a timeline unread for the inactivity period stops existing; reading keeps it", func(t *testing.T) {
		cfg, clock := config(timeline.Limits{Cap: capacity, InactiveAfter: 2 * time.Second})
		testInactive(t, open(t, cfg), clock, wallClockExpiry)
	})
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
	var before timeline.Entry
	for range 1000 {
		p, err := s.Page(ctx, user, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > limit {
			t.Fatalf("page of %d entries; limit %d", len(p.Entries), limit)
		}
		for _, e := range p.Entries {
			ids = append(ids, e.PostID)
		}
		if len(p.Entries) < limit {
			return ids
		}
		before = p.Entries[len(p.Entries)-1]
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
	p, err := s.Page(ctx, "ghost", timeline.Entry{}, 10)
	if err != nil || p.Exists || len(p.Entries) != 0 {
		t.Fatalf("page of a missing timeline = %+v, %v", p, err)
	}
	push(t, s, []string{"ghost"}, 1)
	if ok, err := s.Exists(ctx, "ghost"); err != nil || ok {
		t.Fatalf("Exists after a push to a missing timeline = %v, %v", ok, err)
	}
	create(t, s, "empty")
	p, err = s.Page(ctx, "empty", timeline.Entry{}, 10)
	if err != nil || !p.Exists || len(p.Entries) != 0 {
		t.Fatalf("page of an empty timeline = %+v, %v", p, err)
	}
	if ok, _ := s.Exists(ctx, "empty"); !ok {
		t.Fatal("an empty created timeline does not exist")
	}
	// Once created, a timeline that a push found missing takes the next push.
	create(t, s, "ghost")
	push(t, s, []string{"ghost", "empty"}, 2)
	same(t, "the timeline created after a push missed it", all(t, s, "ghost", 10), ids(2))
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
	p, err := s.Page(ctx, "u", timeline.Entry{}, 1)
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
	// Many users at once (more than a store may send in one call), every fifth without a
	// timeline; the post index must then name exactly the timelines that took the entry, so that
	// RemovePost finds every copy.
	var many []string
	for i := range 700 {
		u := fmt.Sprintf("f%03d", i)
		many = append(many, u)
		if i%5 != 4 {
			create(t, s, u)
		}
	}
	push(t, s, many, 10)
	for i, u := range many {
		if i%5 == 4 {
			if ok, _ := s.Exists(ctx, u); ok {
				t.Fatalf("push created timeline %s", u)
			}
			continue
		}
		if i%50 == 0 || i > 690 {
			same(t, u, all(t, s, u, 10), ids(10))
		}
	}
	if err := s.RemovePost(ctx, entry(10).PostID); err != nil {
		t.Fatal(err)
	}
	for i, u := range many {
		if i%5 != 4 {
			same(t, u, all(t, s, u, 10), nil)
		}
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
	// Push may trim lazily: the newest cap entries are all there, a few older ones may linger.
	got = all(t, s, "big", 100)
	if len(got) < capacity || got[0] != entry(capacity+59).PostID || got[capacity-1] != entry(60).PostID {
		t.Fatalf("after pushes: %d shown, %v..%v", len(got), got[0], got[len(got)-1])
	}
	// Merge trims at once.
	if err := s.Merge(ctx, "big", []timeline.Entry{entry(capacity + 60)}); err != nil {
		t.Fatal(err)
	}
	if got = all(t, s, "big", 100); len(got) != capacity || got[capacity-1] != entry(61).PostID {
		t.Fatalf("after a merge: %d shown, %v..%v", len(got), got[0], got[len(got)-1])
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

func testDelete(t *testing.T, s timeline.Store) {
	create(t, s, "gone", 1, 2, 3)
	create(t, s, "kept", 1, 2)
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, "gone"); err != nil || ok {
		t.Fatalf("Exists after Delete = %v, %v", ok, err)
	}
	push(t, s, []string{"gone", "kept"}, 4)
	if p, err := s.Page(ctx, "gone", timeline.Entry{}, 10); err != nil || p.Exists || len(p.Entries) != 0 {
		t.Fatalf("page of a deleted timeline after a push = %+v, %v", p, err)
	}
	same(t, "the other timeline", all(t, s, "kept", 10), ids(4, 2, 1))
	// A post the deleted timeline held leaves the others as before.
	if err := s.RemovePost(ctx, entry(1).PostID); err != nil {
		t.Fatal(err)
	}
	same(t, "the other timeline after remove post", all(t, s, "kept", 10), ids(4, 2))
	// Deleting a missing timeline is a success; a new one starts empty.
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	create(t, s, "gone")
	same(t, "a timeline created again", all(t, s, "gone", 10), nil)
}

func testPagingWhilePushing(t *testing.T, s timeline.Store) {
	var ns []int
	for n := 100; n < 100+capacity; n++ {
		ns = append(ns, n)
	}
	create(t, s, "u", ns...)
	first := all(t, s, "u", 100)
	// After each page the writer pushes one newer entry while the next page is read, so paging and
	// pushing overlap on every run; one push per page keeps the first entries within the cap.
	more := make(chan struct{}, 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 1000
		for range more {
			if err := s.Push(ctx, []string{"u"}, entry(n)); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	seen := map[string]bool{}
	var before timeline.Entry
	for {
		p, err := s.Page(ctx, "u", before, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if seen[e.PostID] {
				t.Fatalf("%s repeated", e.PostID)
			}
			seen[e.PostID] = true
		}
		if len(p.Entries) < 4 {
			break
		}
		before = p.Entries[len(p.Entries)-1]
		more <- struct{}{}
	}
	close(more)
	wg.Wait()
	// The newest 15 entries of before paging began were seen: one push per page (about 10 pages)
	// cannot trim them away, as it may the oldest ones.
	for _, id := range first[:15] {
		if !seen[id] {
			t.Fatalf("%s existed throughout but was skipped", id)
		}
	}
}

func testInvalid(t *testing.T, s timeline.Store) {
	create(t, s, "u", 1, 2, 3)
	for _, limit := range []int{0, 101} {
		if _, err := s.Page(ctx, "u", timeline.Entry{}, limit); !rookery.IsKind(err, rookery.Invalid) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
	for _, user := range []string{"", "a#b", "with space"} {
		if _, err := s.Page(ctx, user, timeline.Entry{}, 10); !rookery.IsKind(err, rookery.Invalid) {
			t.Errorf("page of user %q: %v", user, err)
		}
		if err := s.Push(ctx, []string{user}, entry(1)); !rookery.IsKind(err, rookery.Invalid) {
			t.Errorf("push to user %q: %v", user, err)
		}
	}
}

func entries(ns ...int) []timeline.Entry {
	var es []timeline.Entry
	for _, n := range ns {
		es = append(es, entry(n))
	}
	return es
}

func begin(t *testing.T, s timeline.Store, user string) string {
	t.Helper()
	build, err := s.Begin(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	return build
}

func complete(t *testing.T, s timeline.Store, user, build string, es []timeline.Entry, floor timeline.Entry) bool {
	t.Helper()
	ok, err := s.Complete(ctx, user, build, es, floor)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// reads reports whether user's timeline reads as a complete one.
func reads(t *testing.T, s timeline.Store, user string) bool {
	t.Helper()
	p, err := s.Page(ctx, user, timeline.Entry{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	return p.Exists
}

// testBuild: the read path's rebuild. Begin makes the timeline exist for pushes but not for reads;
// Complete adds the pull above its floor and publishes it.
func testBuild(t *testing.T, s timeline.Store) {
	build := begin(t, s, "u")
	if build == "" {
		t.Fatal("begin of a missing timeline returned no build")
	}
	if ok, err := s.Exists(ctx, "u"); err != nil || !ok {
		t.Fatalf("a timeline being built does not exist for pushes: %v, %v", ok, err)
	}
	if reads(t, s, "u") {
		t.Fatal("a timeline being built reads as complete")
	}
	push(t, s, []string{"u"}, 9) // fan-out of a post committed during the pull
	if again := begin(t, s, "u"); again != build {
		t.Fatalf("a second begin returned build %q; want the running %q", again, build)
	}
	if complete(t, s, "u", "other", entries(5), timeline.Entry{}) {
		t.Fatal("another build completed the timeline")
	}
	// The pull brought 3..8 of several authors, complete down to 4: 3 is below the floor.
	if !complete(t, s, "u", build, entries(3, 4, 6, 8), entry(4)) {
		t.Fatal("complete by the running build did nothing")
	}
	same(t, "the built timeline", all(t, s, "u", 10), ids(9, 8, 6, 4))
	if again := begin(t, s, "u"); again != "" {
		t.Fatalf("begin of a complete timeline returned build %q", again)
	}
	if complete(t, s, "u", build, entries(7), timeline.Entry{}) {
		t.Fatal("a build completed a timeline twice")
	}
	// Complete of a missing timeline does nothing.
	if complete(t, s, "ghost", build, entries(1), timeline.Entry{}) || reads(t, s, "ghost") {
		t.Fatal("complete made a missing timeline")
	}
	// More than the cap: exactly the newest cap are kept, and the floor rises to the newest cut.
	var many []int
	for n := range capacity + 10 {
		many = append(many, 100+n)
	}
	b := begin(t, s, "big")
	complete(t, s, "big", b, entries(many...), timeline.Entry{})
	got := all(t, s, "big", 100)
	if len(got) != capacity || got[capacity-1] != entry(110).PostID {
		t.Fatalf("built with %d: %d shown, down to %v", len(many), len(got), got[len(got)-1])
	}
	push(t, s, []string{"big"}, 105) // below the cut
	same(t, "after a late push below the cut", all(t, s, "big", 100), got)
}

// testFailedBuild is a loss the fault test found (docs/timelines.md): a rebuild whose pull failed left an empty timeline
// that was trusted, and a late push (a retried fan-out of an older post) then made it look complete
// above that post, hiding a newer post whose fan-out had skipped the missing timeline.
func testFailedBuild(t *testing.T, s timeline.Store) {
	build := begin(t, s, "r")    // the pull that would follow fails
	push(t, s, []string{"r"}, 2) // the late push of p_old
	if reads(t, s, "r") {
		t.Fatal("a timeline whose build never completed reads as complete")
	}
	// The next read builds again: the same build, and a pull that finds p1, p_old and p_new.
	again := begin(t, s, "r")
	if again != build {
		t.Fatalf("begin returned %q; want the unfinished build %q", again, build)
	}
	if !complete(t, s, "r", again, entries(1, 2, 3), timeline.Entry{}) {
		t.Fatal("complete did nothing")
	}
	same(t, "the timeline", all(t, s, "r", 10), ids(3, 2, 1))
}

// testLatePushBelowFloor: a timeline complete above a floor (the rebuild's pull floor, or what a
// trim cut) takes a late push below it with room to spare (removals made room): showing it would
// claim everything between it and the floor, which the timeline does not hold.
func testLatePushBelowFloor(t *testing.T, s timeline.Store) {
	b := begin(t, s, "pulled")
	complete(t, s, "pulled", b, entries(10, 12, 14), entry(12))
	push(t, s, []string{"pulled"}, 11) // below the pull's floor
	push(t, s, []string{"pulled"}, 13) // above it
	same(t, "a pulled timeline", all(t, s, "pulled", 10), ids(14, 13, 12))

	var ns []int
	for n := range capacity + 10 {
		ns = append(ns, 100+n) // 100..139: the cap keeps 110..139, the floor is 109
	}
	create(t, s, "u", ns...)
	for _, n := range append([]int{115}, ns[20:]...) { // 115 and 120..139
		if err := s.Remove(ctx, "u", entry(n).PostID); err != nil {
			t.Fatal(err)
		}
	}
	push(t, s, []string{"u"}, 105) // below the floor, with 21 places free
	push(t, s, []string{"u"}, 115) // above it
	same(t, "a trimmed timeline", all(t, s, "u", 100), ids(119, 118, 117, 116, 115, 114, 113, 112, 111, 110))
}

// testMergeTrims: Merge and Complete keep exactly the newest cap of the union.
func testMergeTrims(t *testing.T, s timeline.Store) {
	var even []int
	for n := range capacity {
		even = append(even, 2*n) // the even entries fill the timeline
	}
	create(t, s, "u", even...)
	// Ten odd entries among the newest, and one already there.
	var odd []int
	for n := 2*capacity - 21; n < 2*capacity; n += 2 {
		odd = append(odd, n)
	}
	if err := s.Merge(ctx, "u", entries(append(odd, even[len(even)-1])...)); err != nil {
		t.Fatal(err)
	}
	got := all(t, s, "u", 100)
	var want []string
	for n := 2*capacity - 1; len(want) < capacity; n-- {
		if n%2 == 0 || n >= 2*capacity-21 {
			want = append(want, entry(n).PostID)
		}
	}
	same(t, "after merge", got, want)
}

func testDropOlder(t *testing.T, s timeline.Store) {
	create(t, s, "u", 1, 2, 3, 4, 5, 6)
	tie := timeline.Entry{PostID: "P0004b", AuthorID: "A0", At: entry(4).At}
	if err := s.Push(ctx, []string{"u"}, tie); err != nil {
		t.Fatal(err)
	}
	if err := s.DropOlder(ctx, "u", tie); err != nil {
		t.Fatal(err)
	}
	same(t, "after drop older", all(t, s, "u", 10), []string{"P0006", "P0005", "P0004b"})
	// The floor rose: a late push or a merge below it is not shown.
	push(t, s, []string{"u"}, 3)
	if err := s.Merge(ctx, "u", entries(2)); err != nil {
		t.Fatal(err)
	}
	same(t, "after pushes below the floor", all(t, s, "u", 10), []string{"P0006", "P0005", "P0004b"})
	// Paging by an entry that is gone still starts right after it.
	p, err := s.Page(ctx, "u", entry(6), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 2 || p.Entries[1].PostID != "P0004b" {
		t.Fatalf("page before P0006 = %+v", p.Entries)
	}
}

func testInactive(t *testing.T, s timeline.Store, clock *clocktest.Clock, wallClockExpiry bool) {
	create(t, s, "read", 1)
	create(t, s, "idle", 1)
	for range 14 { // 4.2 s, twice the inactivity period, with a read of "read" every 0.3 s
		if _, err := s.Page(ctx, "read", timeline.Entry{}, 10); err != nil {
			t.Fatal(err)
		}
		clock.Advance(300 * time.Millisecond)
		if wallClockExpiry {
			time.Sleep(300 * time.Millisecond)
		}
	}
	push(t, s, []string{"read", "idle"}, 2)
	if ok, err := s.Exists(ctx, "idle"); err != nil || ok {
		t.Fatalf("a timeline unread for twice the inactivity period exists: %v, %v", ok, err)
	}
	same(t, "the timeline read all along", all(t, s, "read", 10), ids(2, 1))
}

func testMerge(t *testing.T, s timeline.Store) {
	merge := func(user string, ns ...int) {
		t.Helper()
		if err := s.Merge(ctx, user, entries(ns...)); err != nil {
			t.Fatal(err)
		}
	}
	merge("missing", 1)
	if ok, _ := s.Exists(ctx, "missing"); ok {
		t.Fatal("merge created a timeline")
	}
	// An empty timeline of floor zero holds everything there is: it takes all.
	create(t, s, "empty")
	merge("empty", 1, 2)
	same(t, "an empty timeline after a merge", all(t, s, "empty", 100), ids(2, 1))

	// A full timeline takes cap newer entries (2000, 2002, ... 2058): the exact trim takes every
	// older one away and raises the floor to 1058.
	var full, newer []int
	for n := range capacity {
		full, newer = append(full, 1000+2*n), append(newer, 2000+2*n)
	}
	create(t, s, "u", full...)
	merge("u", newer...)
	// Removals make room: 2040..2058 are left.
	for _, n := range newer[:20] {
		if err := s.Remove(ctx, "u", entry(n).PostID); err != nil {
			t.Fatal(err)
		}
	}
	// One author's posts: 2045 and 2031 (above the floor) go in; 2040 is there already; 1001 would
	// sit under the entries the trim took, so it stays out (the read pulls down there).
	merge("u", 2045, 2040, 2031, 1001)
	same(t, "after the merge", all(t, s, "u", 100), ids(2058, 2056, 2054, 2052, 2050, 2048, 2046, 2045, 2044, 2042, 2040, 2031))
	// A timeline being built takes a merge (a follow committed after its pull read the follows).
	b := begin(t, s, "building")
	merge("building", 7)
	complete(t, s, "building", b, entries(8), timeline.Entry{})
	same(t, "a build merged into", all(t, s, "building", 10), ids(8, 7))
}

// testTTL runs on a store whose entries live 30 minutes: entry n is an hour old.
func testTTL(t *testing.T, s timeline.Store, clock *clocktest.Clock) {
	fresh := func(id string, age time.Duration) timeline.Entry {
		return timeline.Entry{PostID: id, AuthorID: "A0", At: clock.Now().Add(-age)}
	}
	if err := s.Create(ctx, "u", []timeline.Entry{entry(1), fresh("F1", 2*time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []timeline.Entry{entry(2), fresh("F2", time.Minute)} {
		if err := s.Push(ctx, []string{"u"}, e); err != nil {
			t.Fatal(err)
		}
	}
	same(t, "timeline", all(t, s, "u", 10), []string{"F2", "F1"})
	// Time passes: F1 (2 minutes old) goes past the TTL 28 minutes later, F2 a minute after it.
	clock.Advance(28*time.Minute + 30*time.Second)
	same(t, "timeline 28.5 minutes later", all(t, s, "u", 10), []string{"F2"})
}

// testLatePushBelowCap: pushes arrive out of order (fan-out of different posts runs concurrently,
// and waits out outages). Entries older than what the cap already trimmed may be pushed after it;
// the timeline must then still be complete from its newest entry down to its oldest: what it shows
// is the newest part of everything pushed, with no hole where a trimmed entry was.
func testLatePushBelowCap(t *testing.T, s timeline.Store) {
	create(t, s, "u")
	var pushed []string
	for n := 100; n < 100+2*capacity; n++ {
		push(t, s, []string{"u"}, n)
		pushed = append(pushed, entry(n).PostID)
	}
	for n := range 20 {
		push(t, s, []string{"u"}, n)
		pushed = append(pushed, entry(n).PostID)
	}
	slices.Sort(pushed)
	slices.Reverse(pushed) // newest first: post ids sort as their times do
	got := all(t, s, "u", 100)
	if len(got) < capacity || !slices.Equal(got, pushed[:len(got)]) {
		t.Fatalf("timeline shows %v; want the newest part of %v", got, pushed)
	}
}

// testMergeRacingPushes: one writer pushes newer and newer entries while two others merge batches
// of other authors' entries among them (a follow's merge, which trims to exactly the cap). Whatever
// the interleaving, every pushed entry newer than the timeline's oldest entry must be there: a
// store that lost a push to a concurrent merge (a read-modify-write of the whole timeline, say) or
// left a merged entry under pushes a trim took (a hole) fails. An exact trim after each merge
// takes such entries away again, as the lowest, so the merge's own atomicity is tested by
// testMerge, not here.
func testMergeRacingPushes(t *testing.T, s timeline.Store) {
	create(t, s, "u")
	const pushes = 150
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for n := range pushes {
			if err := s.Push(ctx, []string{"u"}, entry(10_000+2*n)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Two mergers, so that one's trim races the other's read of the oldest entry.
	for _, author := range []string{"m", "n"} {
		go func() {
			defer wg.Done()
			for m := range pushes / 3 {
				// Entries between pushed ones, from up to 21 pushes back: some above the oldest
				// entry, some below it, as a follow's merge brings.
				var es []timeline.Entry
				for k := range 8 {
					n := 10_000 + 2*max(0, 3*m-3*k) + 1
					es = append(es, timeline.Entry{PostID: fmt.Sprintf("P%04d%s", n, author), AuthorID: author, At: t0.Add(time.Duration(n) * time.Second)})
				}
				if err := s.Merge(ctx, "u", es); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := all(t, s, "u", 100)
	if len(got) == 0 {
		t.Fatal("the timeline is empty")
	}
	held := map[string]bool{}
	for _, id := range got {
		held[id] = true
	}
	oldest := got[len(got)-1]
	for n := range pushes {
		if id := entry(10_000 + 2*n).PostID; id > oldest && !held[id] {
			t.Fatalf("pushed %s is newer than the oldest entry %s but missing: a hole (timeline %v)", id, oldest, got)
		}
	}
}
