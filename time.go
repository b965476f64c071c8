package rookery

import (
	"fmt"
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

// UnmarshalJSON accepts any RFC 3339 time, and null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("time must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("time must be RFC 3339, e.g. 2026-11-22T10:04:05.123Z")
	}
	t.Time = v
	return nil
}
