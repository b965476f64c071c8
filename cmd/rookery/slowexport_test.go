package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestExportToASlowClient: a data export to a client that reads slowly outlasts the server's read
// and write timeouts (here 1 s and 4 s) and still ends with its end line: the write timeout bounds
// each write of it, not the whole. The client's small receive buffer and the export's size (past
// what the kernel buffers: a send buffer grows to 4 MiB by default) keep the server writing while the
// client stalls and reads. (A write waits until a third of the send buffer is free: at the client's
// rate here, about a second.)
func TestExportToASlowClient(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, nil, "--data-dir", dir, "--http-read-timeout", "1s", "--http-write-timeout", "4s")
	server := strings.TrimSpace(command(t, nil, "token", "--sub", "app", "--server", "--data-dir", dir))
	tok := strings.TrimSpace(command(t, nil, "token", "--sub", "ann", "--data-dir", dir))
	if resp := send(t, "PUT", srv.url+"/v1/users/ann", tok, `{"username":"ann"}`); resp.StatusCode != 201 {
		t.Fatalf("PUT ann = %d", resp.StatusCode)
	}
	// ~10 MB of posts, made as the app's backend would (a user's write limit would slow it).
	text := strings.Repeat("x", 4990)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 2000; i += 8 {
				req, _ := http.NewRequest("POST", srv.url+"/v1/posts", strings.NewReader(fmt.Sprintf(`{"text":"%d %s"}`, i, text)))
				req.Header.Set("Authorization", "Bearer "+server)
				req.Header.Set("X-On-Behalf-Of", "ann")
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					t.Errorf("post %d = %d", i, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/users/ann/export HTTP/1.1\r\nHost: rookery\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tok)
	// Past the read timeout before reading anything, then at most 16 KiB every 5 ms (past the write
	// timeout in all).
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	br := bufio.NewReader(slowReader{conn})
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	last := lines[len(lines)-1]
	if err != nil || !strings.HasPrefix(last, `{"kind":"end"`) {
		t.Fatalf("the export read in %v: %d bytes, %v; its last line %.200q; want the end line", took, len(body), err, last)
	}
	if took < 4*time.Second {
		t.Logf("the export took %v to read: not past the write timeout; the test checks less than it says", took)
	}
}

// slowReader reads at most 16 KiB every 5 ms.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(b []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	return s.r.Read(b[:min(len(b), 16<<10)])
}
