package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// stored is an event as the log keeps it ('e' keys):
//
//	0x01                   format version
//	flags                  bit 0: the event has a de-duplication key ('d'), to delete with it
//	uvarint                when it was appended, Unix nanoseconds
//	event                  events.AppendEvent's form
//
// Logs written before keep JSON ({"e": event, "t": appended at}), which is still read; every
// event of those has a de-duplication key.
type stored struct {
	Event      rookery.Event `json:"e"`
	AppendedAt int64         `json:"t"` // Unix nanoseconds
	Dedup      bool          `json:"-"`
}

const (
	storedV1  = 0x01
	flagDedup = 1
)

// appendStoredHeader appends what precedes the event in its stored value.
func appendStoredHeader(dst []byte, appendedAt int64, dedup bool) []byte {
	var flags byte
	if dedup {
		flags |= flagDedup
	}
	return binary.AppendUvarint(append(dst, storedV1, flags), uint64(appendedAt))
}

func decodeStored(b []byte) (stored, error) {
	if len(b) > 0 && b[0] == '{' {
		st := stored{Dedup: true}
		err := json.Unmarshal(b, &st)
		return st, err
	}
	if len(b) < 2 || b[0] != storedV1 {
		return stored{}, errors.New("event log: unknown stored event format")
	}
	at, n := binary.Uvarint(b[2:])
	if n <= 0 {
		return stored{}, errors.New("event log: stored event is truncated")
	}
	ev, err := events.DecodeEvent(b[2+n:])
	return stored{Event: ev, AppendedAt: int64(at), Dedup: b[1]&flagDedup != 0}, err
}
