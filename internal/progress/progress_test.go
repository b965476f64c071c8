package progress_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rookery/rookery/internal/progress"
)

// Written to something that is not a terminal, progress is plain lines: the count, the percentage
// and the rate, never a carriage return or an escape code.
func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	b := progress.New(&out, "users", 200, "users")
	b.Set(50) // within Every of the start: no line yet
	b.Note("resumed")
	b.Set(200)
	b.Finish()
	got := out.String()
	if strings.ContainsAny(got, "\r\x1b") {
		t.Fatalf("carriage return or escape in %q", got)
	}
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "users: 200 of 200 users (100%)") || !strings.Contains(lines[0], "resumed") {
		t.Fatalf("progress = %q", got)
	}
	var nothing *progress.Bar = progress.New(nil, "x", 1, "")
	nothing.Set(1) // a nil bar does nothing
	nothing.Finish()
}
