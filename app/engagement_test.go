package app_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// TestConcurrentActivitiesAroundMidnight: 100 activities of one user at once, half in the last
// minute of a local day and half in the first seconds of the next, each sent twice, through two
// App instances over one table (two processes: their writes race on the streak record's version),
// give the exact streak, points and daily totals (optimistic locking retried on conflict;
// duplicates by key).
func TestConcurrentActivitiesAroundMidnight(t *testing.T) {
	for name, open := range backendsAt {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sp, _ := time.LoadLocation("America/Sao_Paulo")
			midnight := time.Date(2026, 7, 10, 0, 0, 0, 0, sp) // the 10th begins
			clock := &testClock{now: midnight.Add(-48 * time.Hour).Add(time.Hour)}
			tab := open(t, clock)
			shared := cache.NewMemory(clock, 0) // as --cache redis shares one between processes
			eng := app.Engagement{RateLimit: 10_000, Cache: shared, Limiter: shared}
			a, other := newEngagementApp(t, tab, clock, eng), newEngagementApp(t, tab, clock, eng)
			u := rookery.WithCaller(ctx, rookery.Caller{UserID: "u1"})
			tz := "America/Sao_Paulo"
			if _, _, err := a.PutUser(u, "u1", app.UserInput{Username: "user1", TimeZone: &tz}); err != nil {
				t.Fatal(err)
			}
			// Active on the 8th and the 9th already.
			for i, at := range []time.Time{midnight.Add(-47 * time.Hour), midnight.Add(-23 * time.Hour)} {
				clock.Set(at)
				if _, err := a.RecordActivity(u, app.ActivityInput{Type: "daily_open", IdempotencyKey: fmt.Sprintf("before-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Set(midnight.Add(30 * time.Second))
			const n = 100
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					at := midnight.Add(-time.Duration(i+1) * 500 * time.Millisecond) // 50 before midnight...
					if i >= n/2 {
						at = midnight.Add(time.Duration(i-n/2) * 500 * time.Millisecond) // ...and 50 after
					}
					in := app.ActivityInput{Type: "daily_open", IdempotencyKey: fmt.Sprintf("k%d", i), OccurredAt: &rookery.Time{Time: at}}
					for k := range 2 {
						if _, err := []*app.App{a, other}[(i+k)%2].RecordActivity(u, in); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			s, err := a.UserStreak(u, "u1")
			if err != nil {
				t.Fatal(err)
			}
			want := app.Streak{CurrentStreak: 3, LongestStreak: 3, LastActivityDate: "2026-07-10", TimeZone: tz, TotalPoints: (n + 2) * 10, Counting: true}
			if diff := cmp.Diff(want, s); diff != "" {
				t.Errorf("streak (-want +got):\n%s", diff)
			}
			days, err := a.Points(u, "u1", 3)
			if err != nil {
				t.Fatal(err)
			}
			wantDays := []app.DayPoints{{"2026-07-10", n / 2 * 10, n / 2}, {"2026-07-09", (n/2 + 1) * 10, n/2 + 1}, {"2026-07-08", 10, 1}}
			if diff := cmp.Diff(wantDays, days); diff != "" {
				t.Errorf("points (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreakThroughStorageEqualsFold is the streak property through the App and the table:
// activities at random times, up to 48 hours late, in a random zone, read on a random later day,
// give the streak computed from the whole set of their local days.
func TestStreakThroughStorageEqualsFold(t *testing.T) {
	zones := []string{"UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/New_York", "Australia/Lord_Howe"}
	rapid.Check(t, func(rt *rapid.T) {
		clock := &testClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
		a := newEngagementApp(t, backendsAt["pebble"](t, clock), clock, app.Engagement{RateLimit: 10_000})
		ctx := rookery.WithCaller(context.Background(), rookery.Caller{UserID: "u1"})
		tz := rapid.SampledFrom(zones).Draw(rt, "zone")
		loc, _ := time.LoadLocation(tz)
		if _, _, err := a.PutUser(ctx, "u1", app.UserInput{Username: "user1", TimeZone: &tz}); err != nil {
			rt.Fatal(err)
		}
		var days []streak.Date
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := range steps {
			clock.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "advance hours")) * time.Hour)
			at := clock.Now().Add(-time.Duration(rapid.IntRange(0, 48*60).Draw(rt, "late minutes")) * time.Minute)
			if _, err := a.RecordActivity(ctx, app.ActivityInput{Type: "like", IdempotencyKey: fmt.Sprint(i), OccurredAt: &rookery.Time{Time: at}}); err != nil {
				rt.Fatal(err)
			}
			days = append(days, streak.DateOf(at, loc))
		}
		clock.Add(time.Duration(rapid.IntRange(0, 72).Draw(rt, "read after hours")) * time.Hour)
		got, err := a.UserStreak(ctx, "u1")
		if err != nil {
			rt.Fatal(err)
		}
		sum := streak.Fold(days, nil)
		cur, freezes := sum.CurrentOn(streak.DateOf(clock.Now(), loc), nil)
		if got.CurrentStreak != cur || got.LongestStreak != sum.Longest || got.Freezes != freezes || got.TotalPoints != int64(steps) {
			rt.Fatalf("stored streak %+v; from all days %v: current %d, longest %d, freezes %d", got, days, cur, sum.Longest, freezes)
		}
	})
}

// TestAuthorLeaderboardWithDeletesAndUnlikes runs the consumers over a log that delivers every
// event twice: the authors board counts posts and likes received exactly, and a deleted post or an
// undone like counts no more. Posts, comments and likes also count as activities.
func TestAuthorLeaderboardWithDeletesAndUnlikes(t *testing.T) {
	for name, open := range backends {
		// A sole writer keeps the scores it wrote (and whether users are gone) instead of reading them.
		for _, sole := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sole=%v", name, sole), func(t *testing.T) { testAuthorLeaderboard(t, open, sole) })
		}
	}
}

func testAuthorLeaderboard(t *testing.T, open func(*testing.T) table.Table, sole bool) {
	ctx := context.Background()
	tab := open(t)
	w := newTwiceWorld(t, app.Deps{Table: tab, SoleWriter: sole})
	a, pipeline := w.a, w.run(t)
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }
	for _, u := range []string{"ann", "bob", "cat"} {
		if _, _, err := a.PutUser(as(u), u, app.UserInput{Username: u + "_"}); err != nil {
			t.Fatal(err)
		}
	}
	post := func(u string) string {
		p, _, err := a.CreatePost(as(u), app.PostInput{Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	board := func() []app.AuthorRank {
		t.Helper()
		pipeline.Drain(t, 30*time.Second)
		var first []app.AuthorRank
		for _, period := range app.Periods {
			got, err := a.TopAuthors(as("cat"), period, "", 10)
			must(err)
			if first == nil {
				first = got
			} else if diff := cmp.Diff(first, got); diff != "" {
				t.Errorf("the %s board differs from the day's (all happened today):\n%s", period, diff)
			}
		}
		return first
	}
	p1, p2, p3 := post("ann"), post("ann"), post("bob")
	must(a.LikePost(as("cat"), p1, "cat"))
	must(a.LikePost(as("bob"), p1, "bob"))
	must(a.LikePost(as("cat"), p3, "cat"))
	must(a.LikePost(as("ann"), p3, "ann"))
	must(a.UnlikePost(as("cat"), p3, "cat"))
	want := []app.AuthorRank{{UserID: "ann", Score: 22, Posts: 2, LikesReceived: 2}, {UserID: "bob", Score: 11, Posts: 1, LikesReceived: 1}}
	if diff := cmp.Diff(want, board()); diff != "" {
		t.Fatalf("board (-want +got):\n%s", diff)
	}
	must(a.DeletePost(as("ann"), p1)) // its two likes go with it
	want = []app.AuthorRank{{UserID: "bob", Score: 11, Posts: 1, LikesReceived: 1}, {UserID: "ann", Score: 10, Posts: 1, LikesReceived: 0}}
	if diff := cmp.Diff(want, board()); diff != "" {
		t.Fatalf("after deleting a post with two likes (-want +got):\n%s", diff)
	}
	must(a.DeletePost(as("ann"), p2))
	must(a.UnlikePost(as("ann"), p3, "ann"))
	want = []app.AuthorRank{{UserID: "bob", Score: 10, Posts: 1, LikesReceived: 0}}
	if diff := cmp.Diff(want, board()); diff != "" {
		t.Fatalf("after deleting ann's last post and an unlike (-want +got):\n%s", diff)
	}
	// Posts and likes were activities: ann posted twice (5 each) and liked once (1).
	s, err := a.UserStreak(as("ann"), "ann")
	must(err)
	if s.TotalPoints != 11 || s.CurrentStreak != 1 {
		t.Errorf("ann's streak %+v; want 11 points and a streak of 1", s)
	}
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	if got, err := a.TopAuthors(as("cat"), "day", yesterday, 10); err != nil || len(got) != 0 {
		t.Errorf("yesterday's board = %v, %v; want empty", got, err)
	}
	top, err := a.TopStreaks(as("cat"), 10)
	must(err)
	users := []string{}
	for _, r := range top {
		users = append(users, r.UserID)
	}
	slices.Sort(users)
	if !slices.Equal(users, []string{"ann", "bob", "cat"}) {
		t.Errorf("streak board %v; want the three users who were active today", top)
	}
}

// TestKeptScoresGiveWayToTheTable: a score a sole writer kept that is no longer the item's (the
// item was written behind the process's back) fails its transaction, and the addition is made
// to the item as the table holds it.
func TestKeptScoresGiveWayToTheTable(t *testing.T) {
	ctx := context.Background()
	tab := backends["pebble"](t)
	w := newTwiceWorld(t, app.Deps{Table: tab, SoleWriter: true})
	a, pipeline := w.a, w.run(t)
	as := rookery.WithCaller(ctx, rookery.Caller{UserID: "ann"})
	if _, _, err := a.PutUser(as, "ann", app.UserInput{Username: "ann_"}); err != nil {
		t.Fatal(err)
	}
	p, _, err := a.CreatePost(as, app.PostInput{Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	pipeline.Drain(t, 30*time.Second)
	day := p.CreatedAt.UTC().Format(time.DateOnly)
	k := table.Key{PK: "SCORE#ann", SK: "day#" + day}
	it, err := tab.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	it["posts"], it["score"], it["version"] = int64(10), int64(100), it.Int("version")+1
	if err := tab.Put(ctx, it); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.CreatePost(as, app.PostInput{Text: "two"}); err != nil {
		t.Fatal(err)
	}
	pipeline.Drain(t, 30*time.Second)
	got, err := a.TopAuthors(as, "day", day, 10)
	want := []app.AuthorRank{{UserID: "ann", Score: 110, Posts: 11}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("day board = %+v, %v; want %+v (the table's 10 posts and one more)", got, err, want)
	}
}
