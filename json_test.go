package rookery

import (
	"encoding/json"
	"reflect"
	"slices"
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

// TestPostBodies: posts encoded through a PostBodies are encoded as Post.AppendJSON encodes them,
// when posts of the same id come again unchanged, with another author or reader, or with any one
// field of their body changed (a body kept from before is never used for a post it does not
// encode).
func TestPostBodies(t *testing.T) {
	if n := reflect.TypeFor[Post]().NumField(); n != 12 {
		t.Fatalf("Post has %d fields, not 12: does sameBody compare the new ones?", n)
	}
	str := rapid.SampledFrom([]string{"", "a", "b", "<x>", "é"})
	tm := rapid.SampledFrom([]Time{{}, {time.UnixMilli(1_800_000_000_000)}, {time.UnixMilli(1_800_000_000_001)}})
	rapid.Check(t, func(t *rapid.T) {
		c := NewPostBodies(rapid.IntRange(1, 4).Draw(t, "max"))
		var posts []Post
		for range rapid.IntRange(1, 30).Draw(t, "n") {
			var p Post
			if len(posts) > 0 && rapid.Bool().Draw(t, "again") {
				p = posts[rapid.IntRange(0, len(posts)-1).Draw(t, "which")]
				switch rapid.IntRange(0, 12).Draw(t, "change") {
				case 0:
					p.Text += "!"
				case 1:
					p.Tags = append(slices.Clone(p.Tags), "t")
				case 2:
					if p.Tags == nil {
						p.Tags = []string{}
					} else {
						p.Tags = nil
					}
				case 3:
					p.Mentions = append(slices.Clone(p.Mentions), "m")
				case 4:
					p.Media = append(slices.Clone(p.Media), Media{ID: "m", Type: "image"})
				case 5:
					if p.Media == nil {
						p.Media = []Media{}
					} else {
						p.Media = nil
					}
				case 6:
					p.Visibility += "x"
				case 7:
					p.CreatedAt = Time{p.CreatedAt.Add(time.Millisecond)}
				case 8:
					p.EditedAt = tm.Draw(t, "edited")
				case 9:
					p.LikeCount++
				case 10:
					p.CommentCount++
				case 11:
					p.Author.Username += "u"
					p.LikedByMe = !p.LikedByMe
				}
			} else {
				p = Post{ID: rapid.SampledFrom([]string{"p1", "p2", "p3"}).Draw(t, "id"), Author: Author{ID: str.Draw(t, "aid")},
					Text: str.Draw(t, "text"), Visibility: str.Draw(t, "visibility"), CreatedAt: tm.Draw(t, "created"),
					LikeCount: rapid.Int64Range(0, 2).Draw(t, "likes")}
			}
			posts = append(posts, p)
			if got, want := c.AppendJSON([]byte("x"), p), p.AppendJSON([]byte("x")); string(got) != string(want) {
				t.Fatalf("PostBodies\n%s\nAppendJSON\n%s", got, want)
			}
		}
	})
}
