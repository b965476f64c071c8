package app

import (
	"bytes"
	"encoding/json"

	"github.com/rookery/rookery"
)

// decodeMedia decodes a post's stored media references. CreatePost stores them as json.Marshal
// writes a []rookery.Media of validated ids and types (letters, digits, - and _): no escapes, no
// spaces. parseMedia reads exactly that form; anything else goes to encoding/json, whose general
// decoder costs far more on every post a feed read shows.
func decodeMedia(b []byte) []rookery.Media {
	if ms, ok := parseMedia(b); ok {
		return ms
	}
	var ms []rookery.Media
	json.Unmarshal(b, &ms)
	if ms == nil {
		ms = []rookery.Media{}
	}
	return ms
}

// parseMedia parses [{"id":"…","type":"…"},…] with strings of printable ASCII other than '\\' and
// '"'; ok is false for any other input.
func parseMedia(b []byte) (ms []rookery.Media, ok bool) {
	ms = []rookery.Media{}
	if !eat(&b, `[`) {
		return nil, false
	}
	if eat(&b, `]`) {
		return ms, len(b) == 0
	}
	for {
		var m rookery.Media
		if !eat(&b, `{"id":"`) || !str(&b, &m.ID) || !eat(&b, `,"type":"`) || !str(&b, &m.Type) || !eat(&b, `}`) {
			return nil, false
		}
		ms = append(ms, m)
		if eat(&b, `]`) {
			return ms, len(b) == 0
		}
		if !eat(&b, `,`) {
			return nil, false
		}
	}
}

// eat consumes prefix from the front of *b, if it is there.
func eat(b *[]byte, prefix string) bool {
	if !bytes.HasPrefix(*b, []byte(prefix)) {
		return false
	}
	*b = (*b)[len(prefix):]
	return true
}

// str consumes a string's characters and its closing quote into *s. It fails on an escape, a
// control character or a byte outside ASCII, which encoding/json would not take as it is.
func str(b *[]byte, s *string) bool {
	i := bytes.IndexByte(*b, '"')
	if i < 0 {
		return false
	}
	for _, c := range (*b)[:i] {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	*s, *b = string((*b)[:i]), (*b)[i+1:]
	return true
}
