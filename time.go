package rookery

import (
	"errors"
	"time"
)

// TimeLayout is the API's time format: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a time that encodes to JSON in TimeLayout.
type Time struct{ time.Time }

// MarshalJSON encodes t in UTC with milliseconds; the zero Time encodes as null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// ErrTimeFormat is what UnmarshalJSON returns for a value that is not an RFC 3339 time: a request
// body's decoder reports it as such.
var ErrTimeFormat = errors.New("a time must be an RFC 3339 string, such as 2026-11-22T10:04:05.123Z")

// UnmarshalJSON accepts any RFC 3339 time, and null; anything else is ErrTimeFormat.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return ErrTimeFormat
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return ErrTimeFormat
	}
	t.Time = v
	return nil
}
