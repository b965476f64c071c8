package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"

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

var errCorrupt = errors.New("pebble: corrupt key encoding")

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
