package embedded

// The log's keys (the layout is in the package documentation).

import (
	"bytes"
	"encoding/binary"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/rookery/rookery/internal/pebblekit"
)

func eventKey(p int, off uint64) []byte {
	b := append([]byte{pebblekit.LogEvents}, byte(p>>8), byte(p))
	return binary.BigEndian.AppendUint64(b, off)
}

func groupKey(space byte, group string) []byte {
	return append(append([]byte{space}, group...), 0x00)
}

func offsetKey(group string, p int) []byte {
	return append(groupKey(pebblekit.LogOffsets, group), byte(p>>8), byte(p))
}

// iterOver is the iterator options of the whole space s.
func iterOver(s byte) *cpebble.IterOptions {
	lower, upper := pebblekit.Bounds(s)
	return &cpebble.IterOptions{LowerBound: lower, UpperBound: upper}
}

func dedupKey(id string) []byte { return append([]byte{pebblekit.LogDedup}, id...) }

func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}
