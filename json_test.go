package rookery

import (
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPostAppendJSON: Post.AppendJSON writes the bytes encoding/json writes, for posts with any
// strings (control characters, HTML, U+2028, invalid UTF-8), nil and empty lists, zero times.
func TestPostAppendJSON(t *testing.T) {
	str := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune{'<', '>', '&', '"', '\\', '\u2028', '\u2029', '\x00', '\x1f', '\b', '\f', '\n', '\r', '\t', 'a', 'é', '😀'})),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }))
	strs := rapid.OneOf(rapid.Just([]string(nil)), rapid.SliceOf(str))
	tm := rapid.OneOf(rapid.Just(Time{}), rapid.Map(rapid.Int64Range(-1e12, 1e14), func(ms int64) Time {
		return Time{time.UnixMilli(ms).In(time.FixedZone("x", 3600))}
	}))
	rapid.Check(t, func(t *rapid.T) {
		p := Post{ID: str.Draw(t, "id"), Author: Author{ID: str.Draw(t, "aid"), Username: str.Draw(t, "username"), DisplayName: str.Draw(t, "name")},
			Text: str.Draw(t, "text"), Tags: strs.Draw(t, "tags"), Mentions: strs.Draw(t, "mentions"), Visibility: str.Draw(t, "visibility"),
			CreatedAt: tm.Draw(t, "created"), EditedAt: tm.Draw(t, "edited"), LikeCount: rapid.Int64().Draw(t, "likes"),
			CommentCount: rapid.Int64().Draw(t, "comments"), LikedByMe: rapid.Bool().Draw(t, "liked")}
		if rapid.Bool().Draw(t, "media") {
			p.Media = rapid.SliceOf(rapid.Custom(func(t *rapid.T) Media { return Media{ID: str.Draw(t, "mid"), Type: str.Draw(t, "mtype")} })).Draw(t, "medias")
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON([]byte("x")); string(got[1:]) != string(want) {
			t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got[1:], want)
		}
	})
}
