package rookery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/rookery/rookery/sdk/go/api"
)

// ExportRecord is one record of a user's data export: Kind names what Data is (profile, post,
// comment, like, block, mute, following, follower, notification, activity, points_day, streak).
type ExportRecord struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Export iterates over everything Rookery holds about user (the caller, or with a server token
// anyone), as the server streams it (JSON lines). It checks the export's end line: an export that
// broke off yields an error instead of ending quietly. An export may take longer than the HTTP
// client's timeout: the timeout bounds each wait for the server instead (the reply's head, each
// read of its body), and the time the caller spends on the records does not count.
func (c *Client) Export(ctx context.Context, user string) iter.Seq2[ExportRecord, error] {
	return func(yield func(ExportRecord, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wait := newStallTimer(c.idle, cancel)
		defer wait.stop()
		stalled := func(err error) error {
			if wait.fired.Load() {
				return fmt.Errorf("rookery: the export stalled: the server sent nothing for %s: %w", c.idle, err)
			}
			return err
		}
		resp, err := c.sendExport(ctx, user, wait)
		if err != nil {
			yield(ExportRecord{}, stalled(err))
			return
		}
		defer resp.Body.Close()
		body := stallReader{r: resp.Body, wait: wait}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
			yield(ExportRecord{}, Check(resp, b, nil))
			return
		}
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var rec ExportRecord
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				yield(ExportRecord{}, err)
				return
			}
			switch rec.Kind {
			case "end":
				return
			case "error":
				yield(ExportRecord{}, errors.New("rookery: the export broke off on the server; request it again"))
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		err = sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF // no end line
		}
		yield(ExportRecord{}, stalled(err))
	}
}

// sendExport sends the export's request with the client that has no overall timeout (retrying
// as every read does), and waits for its reply's head at most as long as a read may.
func (c *Client) sendExport(ctx context.Context, user string, wait *stallTimer) (*http.Response, error) {
	req, err := api.NewExportUserRequest(c.base, user)
	if err != nil {
		return nil, err
	}
	req = req.WithContext(ctx)
	for _, edit := range c.editors {
		if err := edit(ctx, req); err != nil {
			return nil, err
		}
	}
	wait.start()
	defer wait.stop()
	return c.longHTTP.Do(req)
}
