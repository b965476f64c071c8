package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/rookery/rookery"
)

// The stored form of an event (outbox items, the embedded log). Events used to be stored as their
// JSON; decoding that is most of what relaying and reading an event cost, so they are stored in a
// small binary form now, and JSON from before is still read:
//
//	0x01                    format version
//	flags                   bit 0: OccurredAt is zero; bit 1: a Trace follows the Key
//	uvarint len, ID
//	uvarint len, Type
//	varint Version
//	varint OccurredAt       Unix milliseconds (absent if zero)
//	uvarint len, Key
//	uvarint len, Trace      (absent unless flag bit 1)
//	Payload                 the rest: compact JSON
//
// An event decodes to what its JSON would: OccurredAt in UTC with milliseconds, the payload
// compacted, a missing payload as null.
const codecV1 = 0x01

const (
	flagZeroTime = 1
	flagTrace    = 2
)

// AppendEvent appends the stored form of ev to dst. A payload that is not JSON is Invalid.
func AppendEvent(dst []byte, ev rookery.Event) ([]byte, error) {
	const op rookery.Op = "events.AppendEvent"
	var flags byte
	if ev.OccurredAt.IsZero() {
		flags |= flagZeroTime
	}
	if ev.Trace != "" {
		flags |= flagTrace
	}
	dst = append(dst, codecV1, flags)
	dst = appendString(dst, ev.ID)
	dst = appendString(dst, ev.Type)
	dst = binary.AppendVarint(dst, int64(ev.Version))
	if flags&flagZeroTime == 0 {
		dst = binary.AppendVarint(dst, ev.OccurredAt.UnixMilli())
	}
	dst = appendString(dst, ev.Key)
	if flags&flagTrace != 0 {
		dst = appendString(dst, ev.Trace)
	}
	if len(ev.Payload) == 0 {
		return append(dst, "null"...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, ev.Payload); err != nil {
		return nil, rookery.E(op, rookery.Invalid, "event payload is not JSON", err)
	}
	return buf.Bytes(), nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

var errShort = errors.New("events: stored event is truncated")

// DecodeEvent decodes an event AppendEvent stored, or an event's JSON (as stored before).
func DecodeEvent(b []byte) (rookery.Event, error) {
	var ev rookery.Event
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &ev)
		return ev, err
	}
	if len(b) < 2 || b[0] != codecV1 {
		return ev, errors.New("events: unknown stored event format")
	}
	flags, r := b[1], reader{b: b[2:]}
	ev.ID = r.string()
	ev.Type = r.string()
	ev.Version = int(r.varint())
	if flags&flagZeroTime == 0 {
		ev.OccurredAt = rookery.Time{Time: time.UnixMilli(r.varint()).UTC()}
	}
	ev.Key = r.string()
	if flags&flagTrace != 0 {
		ev.Trace = r.string()
	}
	if r.err != nil {
		return rookery.Event{}, r.err
	}
	if len(r.b) == 0 {
		return rookery.Event{}, errShort
	}
	ev.Payload = json.RawMessage(bytes.Clone(r.b))
	return ev, nil
}

// reader reads the fields of a stored event; after the first error every read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	if r.err != nil {
		return ""
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || uint64(len(r.b)-k) < n {
		r.err = errShort
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}
