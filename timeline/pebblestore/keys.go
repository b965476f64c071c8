package pebblestore

// The layout's keys and the marker's value (the layout is in the package documentation).

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/timeline"
)

// spaceOf is the iterator options of the whole space s.
func spaceOf(s byte) *cpebble.IterOptions {
	lower, upper := pebblekit.Bounds(s)
	return &cpebble.IterOptions{LowerBound: lower, UpperBound: upper}
}

func markerKey(user string) []byte { return append([]byte{pebblekit.TimelineMarkers}, user...) }

// feedPrefix is the prefix of user's entries; feedEnd is the first key after them.
func feedPrefix(user string) []byte {
	return append(append([]byte{pebblekit.TimelineEntries}, user...), 0)
}

func feedEnd(user string) []byte {
	return append(append([]byte{pebblekit.TimelineEntries}, user...), 1)
}

// ms encodes a time in ms so that byte order is time order (the sign bit flipped).
func ms(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.UnixMilli())^1<<63) }

func unms(b []byte) time.Time { return time.UnixMilli(int64(binary.BigEndian.Uint64(b) ^ 1<<63)).UTC() }

func entryKey(user string, at []byte, post string) []byte {
	return append(append(feedPrefix(user), at...), post...)
}

// holderKey is the post-index key of post's entries in the timelines of users (ascending).
func holderKey(post string, users []string) []byte {
	h := fnv.New64a()
	for _, u := range users {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	k := append(append(append([]byte{pebblekit.TimelinePosts}, post...), 0), users[0]...)
	return binary.BigEndian.AppendUint64(append(k, 0), h.Sum64())
}

// holders encodes a post-index value: the entries' time and their users.
func holders(at []byte, users []string) []byte {
	v := slices.Clone(at)
	for _, u := range users {
		v = binary.AppendUvarint(v, uint64(len(u)))
		v = append(v, u...)
	}
	return v
}

// eachHolder calls do with each user of the post-index key k with value v; false if v is
// malformed. A value of the time alone is a key from before one key per push (one per entry,
// its user the key's last part).
func eachHolder(k, v []byte, do func(user string)) bool {
	if len(v) < 8 {
		return false
	}
	if len(v) == 8 { // 'g' post 0x00 user
		do(string(k[bytes.IndexByte(k, 0)+1:]))
		return true
	}
	for rest := v[8:]; len(rest) > 0; {
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return false
		}
		do(string(rest[w : w+int(n)]))
		rest = rest[w+int(n):]
	}
	return true
}

// parseEntry decodes the key (of user's timeline) and value of an entry.
func parseEntry(user string, k, v []byte) timeline.Entry {
	rest := k[len(user)+2:]
	return timeline.Entry{At: unms(rest[:8]), PostID: string(rest[8:]), AuthorID: string(v)}
}

// liveAt reports whether a marker's value says the timeline exists at now (Unix ms).
func liveAt(v []byte, now int64) bool { return expiry(v) > now }

// expiry returns the time (Unix ms) until which a marker's value says the timeline exists; 0 for
// no marker.
func expiry(v []byte) int64 {
	if len(v) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// mark is a marker's value: the timeline's expiry (Unix ms), its floor (an entry key's be64(at)
// and post; nil for zero) and its build ("" once complete).
type mark struct {
	exp   int64
	floor []byte
	build string
}

func parseMark(v []byte) mark {
	m := mark{exp: expiry(v)}
	if len(v) > 8 && len(v) >= 9+int(v[8]) {
		n := int(v[8])
		if n > 0 {
			m.floor = bytes.Clone(v[9 : 9+n])
		}
		m.build = string(v[9+n:])
	}
	return m
}

func (m mark) value() []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(m.exp))
	if m.floor == nil && m.build == "" {
		return v
	}
	v = append(v, byte(len(m.floor)))
	v = append(v, m.floor...)
	return append(v, m.build...)
}

// floorOf is e as a floor: the suffix of its entry keys.
func floorOf(e timeline.Entry) []byte {
	if e.PostID == "" {
		return nil
	}
	return append(ms(e.At), e.PostID...)
}

// raise raises m's floor to f (an entry key's suffix) if it is lower.
func (m *mark) raise(f []byte) {
	if f != nil && (m.floor == nil || bytes.Compare(f, m.floor) > 0) {
		m.floor = bytes.Clone(f)
	}
}

// below reports whether the entry key k of user is older than m's floor.
func (m mark) below(user string, k []byte) bool {
	return m.floor != nil && bytes.Compare(k[len(user)+2:], m.floor) < 0
}
