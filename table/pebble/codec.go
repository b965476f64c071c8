package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"

	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/table"
)

// Key layout. Every engine key starts with a one-byte space, then its parts, each part escaped so
// that byte order of the encoding is the byte order of the parts (0x00 becomes 0x00 0xFF) and
// terminated by 0x00 0x01, which sorts below every escaped byte:
//
//	base item   'b' PK SK                       -> encoded item
//	index entry 'i' index IPK ISK PK SK         -> encoded item (a full copy: DynamoDB's projection ALL)
//	TTL entry   't' be64(ttl) PK SK             -> empty
//
// Invariant: for every base item, its index entries and its TTL entry exist exactly when the item
// has the index's key attributes / a TTL attribute, and hold its current value. All of an item's
// entries are written in the same batch as the item, under the item's stripe lock.
//
// Other spaces belong to whoever shares the engine (DB.Engine): internal/pebblekit declares them
// all; the store reads only its own.
const (
	spaceBase  = pebblekit.TableItems
	spaceIndex = pebblekit.TableIndexes
	spaceTTL   = pebblekit.TableTTL
)

var terminator = []byte{0x00, 0x01}

// appendPart appends s escaped and terminated.
func appendPart(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		dst = append(dst, c)
		if c == 0x00 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, terminator...)
}

// appendEscaped appends s escaped but not terminated: the prefix of every part that starts with s.
func appendEscaped(dst []byte, s string) []byte {
	t := appendPart(dst, s)
	return t[:len(t)-len(terminator)]
}

// readPart decodes one part from the front of b and returns it and the rest.
func readPart(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != 0x00 {
			out = append(out, c)
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errCorrupt
		}
		switch b[i+1] {
		case 0xFF:
			out = append(out, 0x00)
			i++
		case 0x01:
			return string(out), b[i+2:], nil
		default:
			return "", nil, errCorrupt
		}
	}
	return "", nil, errCorrupt
}

// readParts decodes len(dst) parts (at most 4) from the front of b into dst and returns the rest.
// Parts without escaped bytes, nearly all, are slices of one string: one allocation for all.
func readParts(b []byte, dst []string) ([]byte, error) {
	var bounds [8]int
	pos, plain := 0, true
	for i := range dst {
		start := pos
		for {
			j := bytes.IndexByte(b[pos:], 0x00)
			if j < 0 || pos+j+1 >= len(b) {
				return nil, errCorrupt
			}
			pos += j
			if b[pos+1] == terminator[1] {
				break
			}
			if b[pos+1] != 0xFF {
				return nil, errCorrupt
			}
			plain, pos = false, pos+2
		}
		bounds[2*i], bounds[2*i+1] = start, pos
		pos += len(terminator)
	}
	if !plain {
		rest := b
		for i := range dst {
			var err error
			if dst[i], rest, err = readPart(rest); err != nil {
				return nil, err
			}
		}
		return rest, nil
	}
	all := string(b[:pos])
	for i := range dst {
		dst[i] = all[bounds[2*i]:bounds[2*i+1]]
	}
	return b[pos:], nil
}

func baseKey(k table.Key) []byte {
	b := make([]byte, 0, 1+len(k.PK)+len(k.SK)+4)
	b = append(b, spaceBase)
	b = appendPart(b, k.PK)
	return appendPart(b, k.SK)
}

func indexPrefix(index, ipk string) []byte {
	b := make([]byte, 0, 1+len(index)+len(ipk)+4)
	b = append(b, spaceIndex)
	b = appendPart(b, index)
	return appendPart(b, ipk)
}

func indexKey(index, ipk, isk string, k table.Key) []byte {
	b := indexPrefix(index, ipk)
	b = appendPart(b, isk)
	b = appendPart(b, k.PK)
	return appendPart(b, k.SK)
}

func ttlKey(ttl int64, k table.Key) []byte {
	b := make([]byte, 0, 9+len(k.PK)+len(k.SK)+4)
	b = append(b, spaceTTL)
	b = binary.BigEndian.AppendUint64(b, uint64(ttl))
	b = appendPart(b, k.PK)
	return appendPart(b, k.SK)
}

// Item encoding: uvarint(count), then per attribute uvarint(len(name)) name tag payload, where
// payload is uvarint(len)+bytes for 's' and 'y' (binary), a varint for 'n', nothing for 'T'/'F', and
// uvarint(count) then uvarint(len)+bytes per element for 'l'.
var errCorrupt = errors.New("pebble: corrupt encoding")

func encodeItem(dst []byte, it table.Item) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(it)))
	for name, v := range it {
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		switch v := v.(type) {
		case string:
			dst = append(dst, 's')
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		case int64:
			dst = append(dst, 'n')
			dst = binary.AppendVarint(dst, v)
		case bool:
			if v {
				dst = append(dst, 'T')
			} else {
				dst = append(dst, 'F')
			}
		case []byte:
			dst = append(dst, 'y')
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		case []string:
			dst = append(dst, 'l')
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			for _, s := range v {
				dst = binary.AppendUvarint(dst, uint64(len(s)))
				dst = append(dst, s...)
			}
		default:
			panic("pebble: encodeItem: unchecked type") // CheckItem rejects these first
		}
	}
	return dst
}

func decodeItem(b []byte) (table.Item, error) { return decode(b, nil) }

// decode decodes an item; with keep, only the attributes keep names, and nil if it has none of them.
func decode(b []byte, keep []string) (table.Item, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > math.MaxUint16 {
		return nil, errCorrupt
	}
	pos := w
	// Decoding whole, one string holds the whole value, and names and string values are slices of
	// it, so decoding allocates the map, this string and little else (the hot path of every read).
	// Keeping a few attributes, each kept string is its own.
	var all string
	var it table.Item
	if keep == nil {
		all, it = string(b), make(table.Item, n)
	}
	str := func(start, end int) string {
		if keep == nil {
			return all[start:end]
		}
		return string(b[start:end])
	}
	put := func(name string, v any) {
		if it == nil {
			it = make(table.Item, min(int(n), len(keep)))
		}
		it[name] = v
	}
	kept := func(start, end int) bool {
		if keep == nil {
			return true
		}
		for _, k := range keep { // a few names: faster than a map
			if string(b[start:end]) == k {
				return true
			}
		}
		return false
	}
	// span reads a length-prefixed string's bounds.
	span := func() (start, end int, ok bool) {
		l, w := binary.Uvarint(b[pos:])
		if w <= 0 || uint64(len(b)-pos-w) < l {
			return 0, 0, false
		}
		start, end = pos+w, pos+w+int(l)
		pos = end
		return start, end, true
	}
	for range n {
		ns, ne, ok := span()
		if !ok || pos >= len(b) {
			return nil, errCorrupt
		}
		// An attribute not kept is still read through, to find the next one.
		wanted := kept(ns, ne)
		var name string
		if wanted {
			name = str(ns, ne)
		}
		tag := b[pos]
		pos++
		switch tag {
		case 's':
			start, end, ok := span()
			if !ok {
				return nil, errCorrupt
			}
			if wanted {
				put(name, str(start, end))
			}
		case 'n':
			v, w := binary.Varint(b[pos:])
			if w <= 0 {
				return nil, errCorrupt
			}
			pos += w
			if wanted {
				put(name, v)
			}
		case 'T', 'F':
			if wanted {
				put(name, tag == 'T')
			}
		case 'y':
			start, end, ok := span()
			if !ok {
				return nil, errCorrupt
			}
			if wanted {
				put(name, []byte(str(start, end)))
			}
		case 'l':
			cnt, w := binary.Uvarint(b[pos:])
			if w <= 0 || cnt > uint64(len(b)-pos) {
				return nil, errCorrupt
			}
			pos += w
			var l []string
			if wanted {
				l = make([]string, 0, cnt)
			}
			for range cnt {
				start, end, ok := span()
				if !ok {
					return nil, errCorrupt
				}
				if wanted {
					l = append(l, str(start, end))
				}
			}
			if wanted {
				put(name, l)
			}
		default:
			return nil, errCorrupt
		}
	}
	if pos != len(b) {
		return nil, errCorrupt
	}
	return it, nil
}
