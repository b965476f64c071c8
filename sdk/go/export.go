package rookery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
)

// ExportRecord is one record of a user's data export: Kind names what Data is (profile, post,
// comment, like, block, mute, following, follower, notification, activity, points_day, streak).
type ExportRecord struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Export iterates over everything Rookery holds about user (the caller, or with a server token
// anyone), as the server streams it (JSON lines). It checks the export's end line: an export that
// broke off yields an error instead of ending quietly.
func (c *Client) Export(ctx context.Context, user string) iter.Seq2[ExportRecord, error] {
	return func(yield func(ExportRecord, error) bool) {
		resp, err := c.ClientInterface.ExportUser(ctx, user)
		if err != nil {
			yield(ExportRecord{}, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			yield(ExportRecord{}, Check(resp, body, nil))
			return
		}
		sc := bufio.NewScanner(resp.Body)
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
		yield(ExportRecord{}, err)
	}
}
