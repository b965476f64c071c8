package app

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rookery/rookery"
)

// parseMedia reads what CreatePost stores exactly as encoding/json does, and refuses the rest.
func TestParseMediaAgreesWithEncodingJSON(t *testing.T) {
	for _, ms := range [][]rookery.Media{
		{},
		{{ID: "m1", Type: "image"}},
		{{ID: "a-b_c", Type: "video"}, {ID: "9", Type: "gif"}, {ID: "x", Type: "image"}},
	} {
		b, _ := json.Marshal(ms)
		got, ok := parseMedia(b)
		if !ok {
			t.Fatalf("parseMedia(%s) refused what json.Marshal wrote", b)
		}
		if diff := cmp.Diff(ms, got); diff != "" {
			t.Fatalf("parseMedia(%s) (-want +got):\n%s", b, diff)
		}
	}
	for _, b := range []string{
		``, `[`, `[{"id":"a","type":"b"}`, `[{"id":"a","type":"b"},]`, `[{"id":"a\"b","type":"c"}]`,
		`[{"id":"\u0041","type":"b"}]`, `[ {"id":"a","type":"b"}]`, `[{"type":"b","id":"a"}]`,
		`[{"id":"a","type":"b","url":"c"}]`, `[]x`, `null`,
	} {
		if got, ok := parseMedia([]byte(b)); ok {
			t.Fatalf("parseMedia(%s) = %v; want it refused", b, got)
		}
	}
	// What it refuses, decodeMedia hands to encoding/json.
	got := decodeMedia([]byte(`[{"type":"b","id":"\u0041"}]`))
	if diff := cmp.Diff([]rookery.Media{{ID: "A", Type: "b"}}, got); diff != "" {
		t.Fatalf("decodeMedia fallback (-want +got):\n%s", diff)
	}
	if got := decodeMedia([]byte(`null`)); got == nil || len(got) != 0 {
		t.Fatalf("decodeMedia(null) = %#v; want an empty list", got)
	}
}

func FuzzParseMedia(f *testing.F) {
	f.Add([]byte(`[{"id":"a","type":"b"}]`))
	f.Add([]byte(`[{"id":"a","type":"b"},{"id":"c","type":"d"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseMedia(b)
		if !ok {
			return
		}
		var want []rookery.Media
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("parseMedia accepted %q, which encoding/json refuses: %v", b, err)
		}
		if want == nil {
			want = []rookery.Media{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("parseMedia(%q) (-json +parseMedia):\n%s", b, diff)
		}
	})
}
