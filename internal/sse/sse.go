// Package sse reads Server-Sent Events as a client does: the processing model of the HTML
// standard for the fields Rookery's streams send (id, event, data), which the load harness and the
// tests read streams with.
package sse

import (
	"bufio"
	"io"
	"strings"
)

// Event is one dispatched block of a stream: an event (Type set), or an id alone (Type and Data
// empty), which sets the client's last event id without an event.
type Event struct{ ID, Type, Data string }

// Read calls fn with each block of r until r ends or fn returns false. Comments and retry lines
// are skipped; the data lines of a block are joined with newlines.
func Read(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			ev.Data = strings.Join(data, "\n")
			if ev.ID != "" || ev.Type != "" || ev.Data != "" {
				if !fn(ev) {
					return nil
				}
			}
			ev, data = Event{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}
