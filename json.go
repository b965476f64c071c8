package rookery

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// AppendJSON appends p as encoding/json encodes it (its struct tags; TestPostAppendJSON checks
// that the bytes are the same), without reflection: a page of posts is most of what the API
// writes, and encoding it by reflection was a sixth of a feed read's CPU.
func (p Post) AppendJSON(b []byte) []byte {
	return p.appendTail(p.appendBody(p.appendHead(b)))
}

// appendHead appends the post's opening: its id and author.
func (p Post) appendHead(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = AppendJSONString(b, p.ID)
	b = append(b, `,"author":{"id":`...)
	b = AppendJSONString(b, p.Author.ID)
	b = append(b, `,"username":`...)
	b = AppendJSONString(b, p.Author.Username)
	b = append(b, `,"display_name":`...)
	b = AppendJSONString(b, p.Author.DisplayName)
	return append(b, '}')
}

// appendBody appends the fields from text to comment_count: the post's own, the same for every
// reader (sameBody compares them).
func (p Post) appendBody(b []byte) []byte {
	b = append(b, `,"text":`...)
	b = AppendJSONString(b, p.Text)
	b = append(b, `,"tags":`...)
	b = appendJSONStrings(b, p.Tags)
	b = append(b, `,"mentions":`...)
	b = appendJSONStrings(b, p.Mentions)
	b = append(b, `,"media":`...)
	if p.Media == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, m := range p.Media {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = AppendJSONString(b, m.ID)
			b = append(b, `,"type":`...)
			b = AppendJSONString(b, m.Type)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"visibility":`...)
	b = AppendJSONString(b, p.Visibility)
	b = append(b, `,"created_at":`...)
	b = p.CreatedAt.AppendJSON(b)
	b = append(b, `,"edited_at":`...)
	b = p.EditedAt.AppendJSON(b)
	b = append(b, `,"like_count":`...)
	b = strconv.AppendInt(b, p.LikeCount, 10)
	b = append(b, `,"comment_count":`...)
	return strconv.AppendInt(b, p.CommentCount, 10)
}

// appendTail appends what is the reader's own, and the closing brace.
func (p Post) appendTail(b []byte) []byte {
	b = append(b, `,"liked_by_me":`...)
	b = strconv.AppendBool(b, p.LikedByMe)
	return append(b, '}')
}

// sameBody reports whether a and b encode the same body (appendBody). Strings that share their
// bytes (a post rendered once and shown again) compare without reading them.
func sameBody(a, b Post) bool {
	return a.Text == b.Text && sameStrings(a.Tags, b.Tags) && sameStrings(a.Mentions, b.Mentions) &&
		(a.Media == nil) == (b.Media == nil) && slices.Equal(a.Media, b.Media) && a.Visibility == b.Visibility &&
		a.CreatedAt.Equal(b.CreatedAt.Time) && a.EditedAt.Equal(b.EditedAt.Time) &&
		a.LikeCount == b.LikeCount && a.CommentCount == b.CommentCount
}

func sameStrings(a, b []string) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

// PostBodies keeps the encoded bodies of posts (appendBody: text to comment_count), by id, so that
// a post shown again, on another page or to another reader, copies its body instead of escaping
// its text and formatting its times again. A body is used only for a post whose body fields are
// equal to those it was encoded from (sameBody), so it is never stale, whatever changed the post.
// The zero value keeps none; it is safe for concurrent use.
type PostBodies struct {
	max int

	mu     sync.Mutex
	bodies map[string]*postBody
}

type postBody struct {
	from Post // what json was encoded from
	json []byte
}

// NewPostBodies returns a PostBodies that keeps up to max bodies.
func NewPostBodies(max int) *PostBodies {
	return &PostBodies{max: max, bodies: make(map[string]*postBody)}
}

// AppendJSON appends p as p.AppendJSON does, its body from c when kept.
func (c *PostBodies) AppendJSON(b []byte, p Post) []byte {
	if c == nil || c.max <= 0 {
		return p.AppendJSON(b)
	}
	b = p.appendHead(b)
	c.mu.Lock()
	kept := c.bodies[p.ID]
	c.mu.Unlock()
	if kept != nil && sameBody(kept.from, p) {
		if unsafe.StringData(kept.from.Text) != unsafe.StringData(p.Text) {
			// Equal, but another rendering of the post (the copy kept since the body was): keep
			// p's fields instead, so that comparing with that rendering reads no strings again.
			c.keep(p, kept.json)
		}
		return p.appendTail(append(b, kept.json...))
	}
	start := len(b)
	b = p.appendBody(b)
	c.keep(p, slices.Clone(b[start:]))
	return p.appendTail(b)
}

// keep keeps json as the body of p.
func (c *PostBodies) keep(p Post, json []byte) {
	kept := &postBody{from: p, json: json}
	kept.from.Author, kept.from.LikedByMe = Author{}, false // not the body's: not kept
	c.mu.Lock()
	if len(c.bodies) >= c.max {
		clear(c.bodies) // simple, and refilled by the next pages
	}
	c.bodies[p.ID] = kept
	c.mu.Unlock()
}

// AppendJSON appends t as MarshalJSON encodes it.
func (t Time) AppendJSON(b []byte) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, s)
	}
	return append(b, ']')
}

// AppendJSONString appends s quoted as encoding/json quotes strings by default: the short escapes
// of \b \f \n \r \t, \u00XX for the other control characters and for < > & (HTML escaping),
// \u2028 and \u2029, and \ufffd for each byte of invalid UTF-8.
func AppendJSONString(b []byte, s string) []byte {
	// The common case of ASCII that needs no escape first: one load and branch a byte.
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied
	for i := 0; i < len(s); {
		c := s[i]
		if jsonPlain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonPlain tells the bytes that appendJSONString copies as they are: ASCII but for the control
// characters, the quote, the backslash and < > &.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return t
}()
