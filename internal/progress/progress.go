// Package progress shows how far a long command has got. On a terminal it draws a bar with the
// count, the percentage, the rate and the time left (schollz/progressbar); on anything else (a
// pipe, a file, a CI log) it writes a plain line every few seconds and never a carriage return.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Every is how often a plain line is written when the output is not a terminal.
const Every = 5 * time.Second

// Bar is the progress of one piece of work of a known size. Its methods are safe for concurrent
// use; a nil *Bar does nothing.
type Bar struct {
	bar *progressbar.ProgressBar // on a terminal; nil otherwise

	mu    sync.Mutex
	w     io.Writer
	what  string
	unit  string
	total int64
	done  int64
	note  string
	start time.Time
	last  time.Time
}

// New returns the progress of what (a short name) towards total units (a plural noun such as
// "users", or "" for a plain count) written to w; a nil w shows nothing.
func New(w io.Writer, what string, total int64, unit string) *Bar {
	if w == nil {
		return nil
	}
	b := &Bar{w: w, what: what, unit: unit, total: total, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
			progressbar.OptionSetPredictTime(true), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
	}
	return b
}

// Set records that done units are done.
func (b *Bar) Set(done int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = done
	if b.bar != nil {
		b.bar.Set64(done)
		return
	}
	if time.Since(b.last) >= Every {
		b.last = time.Now()
		fmt.Fprintln(b.w, b.line())
	}
}

// Note sets a few words shown beside the count (what a count alone does not say).
func (b *Bar) Note(note string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.note = note
	if b.bar != nil {
		b.bar.Describe(b.what + " " + note)
	}
}

// Finish ends the bar: on a terminal it is completed, elsewhere a last line says how it went.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Finish()
		return
	}
	fmt.Fprintln(b.w, b.line())
}

// line is the plain line: "users: 12000 of 96000 users (12%), 3100 users/s, about 27s left".
func (b *Bar) line() string {
	took := time.Since(b.start)
	rate := float64(b.done) / max(took.Seconds(), 1e-3)
	s := fmt.Sprintf("%s: %d of %d %s", b.what, b.done, b.total, b.unit)
	if b.total > 0 {
		s += fmt.Sprintf(" (%.0f%%)", 100*float64(b.done)/float64(b.total))
	}
	s += fmt.Sprintf(", %.0f %s/s", rate, b.unit)
	if b.done < b.total && rate > 0 {
		s += fmt.Sprintf(", about %s left", time.Duration(float64(b.total-b.done)/rate*float64(time.Second)).Round(time.Second))
	} else {
		s += fmt.Sprintf(", in %s", took.Round(100*time.Millisecond))
	}
	if b.note != "" {
		s += "; " + b.note
	}
	return s
}
