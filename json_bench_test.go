package rookery

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkPostJSON: a post with a 200-character text, by AppendJSON and by encoding/json.
func BenchmarkPostJSON(b *testing.B) {
	p := Post{ID: "01JD4Y6W3Q6V9J8K2M5N7P0R1S", Author: Author{ID: "u123", Username: "ann", DisplayName: "Ann Example"},
		Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5), Tags: []string{"go", "feeds"},
		Visibility: Public, CreatedAt: Time{time.Now()}, LikeCount: 12}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = p.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(p)
		}
	})
}
