package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestExportThroughHTTP exports a user with something of every kind (more posts than a page) and
// checks each kind's records, that nothing of anyone else is in it, and the end line's count.
func TestExportThroughHTTP(t *testing.T) {
	f, _ := newFixture(t)
	server := token(t, "app", true)
	for _, u := range []string{"exa", "exb", "exc"} {
		f.want(f.do("PUT", "/v1/users/"+u, server, `{"username":"`+u+`"}`), 201, "")
	}
	a, b := token(t, "exa", false), token(t, "exb", false)
	for i := range 105 {
		vis := "public"
		if i%10 == 0 {
			vis = "followers"
		}
		f.want(f.do("POST", "/v1/posts", a, fmt.Sprintf(`{"text":"a's post %d","visibility":%q}`, i, vis)), 201, "")
	}
	bp := f.do("POST", "/v1/posts", b, `{"text":"b's post"}`).body["id"].(string)
	f.want(f.do("PUT", "/v1/posts/"+bp+"/likes/exa", a, ""), 200, "")
	f.want(f.do("POST", "/v1/posts/"+bp+"/comments", a, `{"text":"a's comment"}`), 201, "")
	f.want(f.do("POST", "/v1/posts/"+bp+"/comments", b, `{"text":"b's comment"}`), 201, "")
	f.want(f.do("PUT", "/v1/users/exa/following/exb", a, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/exb/following/exa", b, ""), 200, "")
	f.want(f.do("PUT", "/v1/users/exa/blocks/exc", a, ""), 204, "")
	f.want(f.do("PUT", "/v1/users/exa/mutes/exb", a, ""), 204, "")
	f.want(f.do("POST", "/v1/activities", a, `{"type":"daily_open","idempotency_key":"o1"}`), 201, "")
	// b's follow notifies a (the notifications consumer runs in the fixture).
	var records map[string][]map[string]any
	var r reply
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r = f.do("GET", "/v1/users/exa/export", a, "")
		f.want(r, 200, "")
		records = map[string][]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(r.raw), "\n") {
			var rec struct {
				Kind string
				Data json.RawMessage
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("a line that is not JSON: %q", line)
			}
			var data map[string]any
			json.Unmarshal(rec.Data, &data)
			records[rec.Kind] = append(records[rec.Kind], data)
		}
		if len(records["notification"]) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q", ct)
	}
	counts := map[string]int{}
	total := 0
	for k, v := range records {
		counts[k] = len(v)
		if k != "end" {
			total += len(v)
		}
	}
	want := map[string]int{"profile": 1, "post": 105, "comment": 1, "like": 1, "following": 1, "follower": 1, "block": 1, "mute": 1,
		"notification": 1, "streak": 1, "end": 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%d %s records; want %d (all: %v)", counts[k], k, n, counts)
		}
	}
	if counts["activity"] < 1 || counts["points_day"] < 1 {
		t.Errorf("activities %d, daily points %d; want some of each", counts["activity"], counts["points_day"])
	}
	if records["comment"][0]["text"] != "a's comment" || records["like"][0]["post_id"] != bp ||
		records["block"][0]["user_id"] != "exc" || records["mute"][0]["user_id"] != "exb" {
		t.Errorf("comment %v, like %v, block %v, mute %v", records["comment"], records["like"], records["block"], records["mute"])
	}
	if records["end"][0]["records"] != float64(total) {
		t.Errorf("the end line says %v records; there are %d", records["end"][0]["records"], total)
	}
	for _, rec := range records["comment"] {
		if _, leaked := rec["GSI1PK"]; leaked {
			t.Errorf("a storage attribute in the export: %v", rec)
		}
	}
	// Times are RFC 3339 in every record, as everywhere in the API (stored ones are Unix ms).
	for kind, field := range map[string]string{"comment": "created_at", "like": "liked_at", "block": "blocked_at",
		"mute": "muted_at", "activity": "occurred_at", "following": "followed_at", "notification": "created_at"} {
		for _, rec := range records[kind] {
			if s, _ := rec[field].(string); !strings.HasSuffix(s, "Z") || s[len(s)-5] != '.' {
				t.Errorf("%s's %s is %#v; want an RFC 3339 time with milliseconds", kind, field, rec[field])
			} else if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Errorf("%s's %s: %v", kind, field, err)
			}
		}
	}
	// Another user's export is theirs or a server's to ask for.
	f.want(f.do("GET", "/v1/users/exa/export", b, ""), 403, "forbidden")
	f.want(f.do("GET", "/v1/users/exa/export", server, ""), 200, "")
	f.want(f.do("GET", "/v1/users/nobody/export", server, ""), 404, "not_found")
}
