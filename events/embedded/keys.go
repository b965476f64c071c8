package embedded

// The log's keys (the layout is in the package documentation).

import (
	"bytes"
	"encoding/binary"
)

func eventKey(p int, off uint64) []byte {
	b := append([]byte{'e'}, byte(p>>8), byte(p))
	return binary.BigEndian.AppendUint64(b, off)
}

func groupKey(space byte, group string) []byte {
	return append(append([]byte{space}, group...), 0x00)
}

func offsetKey(group string, p int) []byte {
	return append(groupKey('o', group), byte(p>>8), byte(p))
}

func dedupKey(id string) []byte { return append([]byte{'d'}, id...) }

func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}
