package httpapi_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery/app"
)

// TestActivitiesThroughHTTP: POST /v1/activities with its duplicate, validation and rate limit
// answers; the streak, the points history and both leaderboards; posts and likes through the API
// count as activities and score on the authors board.
func TestActivitiesThroughHTTP(t *testing.T) {
	f, _ := newFixtureWith(t, fixtureConfig{engagement: app.Engagement{RateLimit: 5, RatePer: time.Minute}})
	server := token(t, "app", true)
	for _, u := range []string{"ann", "bob"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`","timezone":"Europe/Lisbon"}`), 201, "")
	}
	ann, bob := token(t, "ann", false), token(t, "bob", false)

	r := f.do("POST", "/v1/activities", ann, `{"type":"daily_open","idempotency_key":"open-1","source":"mobile_app"}`)
	f.want(r, 201, "")
	if r.body["points_awarded"] != float64(10) || r.body["duplicate"] != false {
		t.Fatalf("first activity: %s", r.raw)
	}
	st := r.body["streak"].(map[string]any)
	if st["current_streak"] != float64(1) || st["timezone"] != "Europe/Lisbon" || st["total_points"] != float64(10) {
		t.Fatalf("streak after the first activity: %s", r.raw)
	}
	r = f.do("POST", "/v1/activities", ann, `{"type":"daily_open","idempotency_key":"open-1"}`)
	f.want(r, 200, "")
	if r.body["duplicate"] != true || r.body["points_awarded"] != float64(0) || r.body["streak"].(map[string]any)["total_points"] != float64(10) {
		t.Fatalf("duplicate: %s", r.raw)
	}
	late := time.Now().Add(-49 * time.Hour).UTC().Format(time.RFC3339)
	f.want(f.do("POST", "/v1/activities", ann, `{"type":"daily_open","idempotency_key":"old","occurred_at":"`+late+`"}`), 400, "invalid")
	for _, at := range []string{`"yesterday"`, `"2026-12-05 10:00"`, `1764928800`} {
		r := f.do("POST", "/v1/activities", ann, `{"type":"daily_open","idempotency_key":"bad-time","occurred_at":`+at+`}`)
		if f.want(r, 400, "invalid"); !strings.Contains(r.body["detail"].(string), "RFC 3339") {
			t.Errorf("occurred_at %s: detail %q does not say what a time must be", at, r.body["detail"])
		}
		if fields, _ := r.body["fields"].([]any); len(fields) != 1 || fields[0].(map[string]any)["name"] != "occurred_at" {
			t.Errorf("occurred_at %s: fields %v; want occurred_at named", at, r.body["fields"])
		}
	}
	f.want(f.do("POST", "/v1/activities", ann, `{"type":"sleep","idempotency_key":"x"}`), 400, "invalid")
	f.want(f.do("POST", "/v1/activities", ann, `{"type":"daily_open","idempotency_key":"x","extra":1}`), 400, "invalid")

	// The rate limit (5 a minute here) counts every write, refused ones included.
	var limited reply
	for i := range 5 {
		limited = f.do("POST", "/v1/activities", ann, fmt.Sprintf(`{"type":"like","idempotency_key":"burst-%d"}`, i))
	}
	f.want(limited, 429, "rate_limited")
	if s, err := strconv.Atoi(limited.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Fatalf("Retry-After %q", limited.header.Get("Retry-After"))
	}
	f.want(f.do("POST", "/v1/activities", bob, `{"type":"daily_open","idempotency_key":"open-1"}`), 201, "")

	// Posts and likes through the API are activities, and score on the authors board.
	post := f.do("POST", "/v1/posts", ann, `{"text":"hello"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/posts/"+post+"/likes/bob", bob, ""), 200, "")
	f.drain()
	r = f.do("GET", "/v1/users/ann/streak", bob, "")
	f.want(r, 200, "")
	// 10 for the open, 3 likes let through before the limit (the duplicate counted as a write), 5
	// for the post.
	if r.body["total_points"] != float64(10+3+5) || r.body["current_streak"] != float64(1) {
		t.Fatalf("ann's streak: %s (want 10 + 3 likes + 5 for the post)", r.raw)
	}
	r = f.do("GET", "/v1/users/ann/points?days=7", ann, "")
	f.want(r, 200, "")
	days := r.body["days"].([]any)
	if len(days) != 1 || days[0].(map[string]any)["points"] != float64(18) || days[0].(map[string]any)["events"] != float64(5) {
		t.Fatalf("ann's points: %s", r.raw)
	}
	f.want(f.do("GET", "/v1/users/ann/points?days=91", ann, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/users/ann/points", bob, ""), 403, "forbidden")

	r = f.do("GET", "/v1/leaderboards/authors?period=month", bob, "")
	f.want(r, 200, "")
	items := r.body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["user_id"] != "ann" || items[0].(map[string]any)["score"] != float64(11) {
		t.Fatalf("authors board: %s", r.raw)
	}
	f.want(f.do("GET", "/v1/leaderboards/authors?period=year", bob, ""), 400, "invalid")
	f.want(f.do("GET", "/v1/leaderboards/authors?at=yesterday", bob, ""), 400, "invalid")
	r = f.do("GET", "/v1/leaderboards/streaks?limit=5", bob, "")
	f.want(r, 200, "")
	if n := len(r.body["items"].([]any)); n != 2 {
		t.Fatalf("streak board: %s", r.raw)
	}
}
