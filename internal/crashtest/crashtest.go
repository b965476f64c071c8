// Package crashtest runs a test's writer in a child process (the test binary itself) and kills it
// with SIGKILL mid-stream, for the crash tests of the embedded engines: whatever the child
// acknowledged must survive.
package crashtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Acks is the child's side: it prints "ack <v>" for every value from acks, flushing whenever the
// channel is drained (so an acknowledgement is out before the next commit is), until acks closes.
func Acks(acks <-chan string) {
	w := bufio.NewWriter(os.Stdout)
	for v := range acks {
		fmt.Fprintln(w, "ack", v)
		if len(acks) == 0 {
			w.Flush()
		}
	}
	w.Flush()
}

// Run is the parent's side: it starts the test named test in a child with env added, kills it with
// SIGKILL kill after its first line of output (with kill 0 it must end by itself within a minute),
// passes every acknowledged value to ack, and returns the last line that was not an
// acknowledgement and whether the child was killed by the signal.
func Run(t testing.TB, test string, env []string, kill time.Duration, ack func(string)) (last string, killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer guard.Stop()
	var timer *time.Timer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if timer == nil && kill > 0 {
			timer = time.AfterFunc(kill, func() { cmd.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		if v, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			ack(v)
		} else {
			last = sc.Text()
		}
	}
	cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return last, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
