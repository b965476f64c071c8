package table

import (
	"encoding/binary"
	"errors"
	"math"
)

// Item encoding: uvarint(count), then per attribute uvarint(len(name)) name tag payload, where
// payload is uvarint(len)+bytes for 's' and 'y' (binary), a varint for 'n', nothing for 'T'/'F', and
// uvarint(count) then uvarint(len)+bytes per element for 'l'.
var errCorrupt = errors.New("table: corrupt item encoding")

// AppendItem appends the encoding of it to dst. It is the stored form of items (the embedded
// store's values, the cache's copies); it must be a checked item (CheckItem's types).
func AppendItem(dst []byte, it Item) []byte {
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
			panic("table: AppendItem: unchecked type") // CheckItem rejects these first
		}
	}
	return dst
}

// DecodeItem decodes what AppendItem encoded; with keep, only the attributes keep names, and nil
// if it has none of them.
func DecodeItem(b []byte, keep ...string) (Item, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > math.MaxUint16 {
		return nil, errCorrupt
	}
	pos := w
	// Decoding whole, one string holds the whole value, and names and string values are slices of
	// it, so decoding allocates the map, this string and little else (the hot path of every read).
	// Keeping a few attributes, each kept string is its own.
	var all string
	var it Item
	if keep == nil {
		all, it = string(b), make(Item, n)
	}
	str := func(start, end int) string {
		if keep == nil {
			return all[start:end]
		}
		return string(b[start:end])
	}
	put := func(name string, v any) {
		if it == nil {
			it = make(Item, min(int(n), len(keep)))
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
