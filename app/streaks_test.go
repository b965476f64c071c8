package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/table"
)

// testClock is a clock the test sets.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time)     { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// newEngagementApp returns an App over tab whose events go to an in-memory log nobody reads, on
// clock.
func newEngagementApp(t testing.TB, tab table.Table, clock rookery.Clock, eng app.Engagement) *app.App {
	t.Helper()
	log, err := embedded.Open(embedded.Options{InMemory: true, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	var seq int64
	var mu sync.Mutex
	return app.New(app.Deps{Table: tab, Events: log, Outbox: &events.Outbox{Table: tab, Log: log}, Clock: clock,
		IDs: func() string {
			mu.Lock()
			defer mu.Unlock()
			seq++
			return fmt.Sprintf("%020d", seq)
		}, Engagement: eng})
}

// TestStreakScenarios runs the datadriven scenarios of testdata/streaks on every table backend:
// dated activities across zones, DST changes, midnight, zone changes, duplicates, late arrivals,
// freezes and outage repair, through the App (validation, storage, optimistic locking, cache).
//
// Commands (times are RFC 3339; user defaults to u1):
//
//	now <time>                                   set the clock
//	advance <duration>                           move the clock on
//	user [id=] tz=<zone>                         create the user, or change their zone
//	activity [id=] key=<k> [at=<time>] [type=]   record an activity (type daily_open)
//	streak [id=]                                 read the streak
//	points [id=] [days=]                         read the points history
//	board [limit=]                               read the streak leaderboard
//	repair from=<time> to=<time>                 run the outage repair
func TestStreakScenarios(t *testing.T) {
	for name, open := range backendsAt {
		t.Run(name, func(t *testing.T) {
			datadriven.Walk(t, "testdata/streaks", func(t *testing.T, path string) {
				clock := &testClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
				a := newEngagementApp(t, open(t, clock), clock, app.Engagement{RateLimit: 1000})
				ctx := context.Background()
				server := rookery.WithCaller(ctx, rookery.Caller{UserID: "ops", Server: true})
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					arg := func(key, def string) string {
						for _, a := range d.CmdArgs {
							if a.Key == key && len(a.Vals) > 0 {
								return a.Vals[0]
							}
						}
						return def
					}
					when := func(s string) time.Time {
						tm, err := time.Parse(time.RFC3339, s)
						if err != nil {
							d.Fatalf(t, "bad time %q: %v", s, err)
						}
						return tm
					}
					user := arg("id", "u1")
					as := rookery.WithCaller(ctx, rookery.Caller{UserID: user})
					switch d.Cmd {
					case "now":
						clock.Set(when(d.CmdArgs[0].Key))
						return ""
					case "advance":
						dur, err := time.ParseDuration(d.CmdArgs[0].Key)
						if err != nil {
							d.Fatalf(t, "%v", err)
						}
						clock.Add(dur)
						return ""
					case "user":
						tz := arg("tz", "UTC")
						if _, _, err := a.PutUser(as, user, app.UserInput{Username: "user_" + user, TimeZone: &tz}); err != nil {
							return "error: " + err.Error()
						}
						return "ok"
					case "activity":
						in := app.ActivityInput{Type: arg("type", "daily_open"), IdempotencyKey: arg("key", ""), Source: arg("source", "")}
						if at := arg("at", ""); at != "" {
							in.OccurredAt = &rookery.Time{Time: when(at)}
						}
						res, err := a.RecordActivity(as, in)
						if err != nil {
							return "error: " + rookery.KindOf(err).String() + ": " + rookery.Message(err)
						}
						dup := ""
						if res.Duplicate {
							dup = " (duplicate)"
						}
						return fmt.Sprintf("+%d points%s\n%s", res.PointsAwarded, dup, showStreak(res.Streak))
					case "streak":
						s, err := a.UserStreak(as, user)
						if err != nil {
							return "error: " + err.Error()
						}
						return showStreak(s)
					case "points":
						days, _ := strconv.Atoi(arg("days", "7"))
						ps, err := a.Points(as, user, days)
						if err != nil {
							return "error: " + err.Error()
						}
						var b strings.Builder
						for _, p := range ps {
							fmt.Fprintf(&b, "%s: %d points, %d events\n", p.Date, p.Points, p.Events)
						}
						return b.String()
					case "board":
						limit, _ := strconv.Atoi(arg("limit", "10"))
						rs, err := a.TopStreaks(as, limit)
						if err != nil {
							return "error: " + err.Error()
						}
						var b strings.Builder
						for _, r := range rs {
							fmt.Fprintf(&b, "%s %d\n", r.UserID, r.CurrentStreak)
						}
						return b.String()
					case "repair":
						var b strings.Builder
						n, err := a.RepairStreaks(server, when(arg("from", "")), when(arg("to", "")), func(r app.StreakRepair) {
							fmt.Fprintf(&b, "%s: excused %s; streak %d -> %d\n", r.UserID, strings.Join(r.Excused, " "), r.Before, r.After)
						})
						if err != nil {
							return "error: " + err.Error()
						}
						fmt.Fprintf(&b, "checked %d\n", n)
						return b.String()
					}
					d.Fatalf(t, "unknown command %s", d.Cmd)
					return ""
				})
			})
		})
	}
}

func showStreak(s app.Streak) string {
	last := s.LastActivityDate
	if last == "" {
		last = "none"
	}
	out := fmt.Sprintf("streak %d (longest %d), last %s, freezes %d, points %d, zone %s",
		s.CurrentStreak, s.LongestStreak, last, s.Freezes, s.TotalPoints, s.TimeZone)
	if !s.Counting {
		out += ", not counting (zone changes)"
	}
	return out
}

// TestEventActivityCountsOnce: a post's activity is recorded under the event's id, so a redelivery
// of the event counts nothing, also for an event whose activity an earlier version recorded by
// claiming the key "event:<id>" (a redelivery after an upgrade).
func TestEventActivityCountsOnce(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Millisecond)
			a := newEngagementApp(t, open(t), &testClock{now: now}, app.Engagement{})
			as := rookery.WithCaller(ctx, rookery.Caller{UserID: "ann"})
			if _, _, err := a.PutUser(as, "ann", app.UserInput{Username: "ann_"}); err != nil {
				t.Fatal(err)
			}
			points := func() int64 {
				t.Helper()
				s, err := a.UserStreak(as, "ann")
				if err != nil {
					t.Fatal(err)
				}
				return s.TotalPoints
			}
			deliver := func(id string) {
				t.Helper()
				p, err := json.Marshal(app.PostPayload{PostID: "p-" + id, AuthorID: "ann", CreatedAt: rookery.Time{Time: now}})
				if err != nil {
					t.Fatal(err)
				}
				// Not a first delivery (the context does not say so): the handler must find what
				// an earlier delivery recorded.
				ev := rookery.Event{ID: id, Type: app.PostCreated, Version: 1, Key: "posts:ann", OccurredAt: rookery.Time{Time: now}, Payload: p}
				if err := a.ApplyActivities(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			// What an earlier version's consumer did with event E1: the claim of "event:E1".
			if _, err := a.RecordActivity(as, app.ActivityInput{Type: "post", IdempotencyKey: "event:E1", Source: "api"}); err != nil {
				t.Fatal(err)
			}
			deliver("E1")
			if got := points(); got != 5 {
				t.Fatalf("after redelivering an event an earlier version recorded: %d points; want 5", got)
			}
			deliver("E2")
			deliver("E2")
			if got := points(); got != 10 {
				t.Fatalf("after delivering a new event twice: %d points; want 10", got)
			}
		})
	}
}
