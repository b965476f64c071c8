package rookery

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// StreamEvent is one event of the caller's live stream (docs/api.md, "Live streams"): Type is
// feed.post, feed.update, feed.remove, notification, streak or reset; Data its JSON
// (api.FeedPostEvent, api.FeedUpdateEvent, api.FeedRemoveEvent, api.NotificationEvent, api.Streak,
// api.ResetEvent).
type StreamEvent struct {
	ID   string
	Type string
	Data json.RawMessage
}

// Decode decodes the event's data into v.
func (e StreamEvent) Decode(v any) error { return json.Unmarshal(e.Data, v) }

// Stream iterates over the caller's live stream from after lastID ("" : from now), as one
// uninterrupted sequence: when the connection drops, it reconnects (with a growing pause, up to
// 30 s) with Last-Event-ID, so no event is missed or repeated; a connection that brings nothing,
// not even a heartbeat, for the stream timeout (WithStreamTimeout) counts as dropped. It ends
// with ctx, or with an error that retrying cannot mend (the token refused, a 4xx), which it
// yields. Request with ActingAs for a server token.
func (c *Client) Stream(ctx context.Context, lastID string) iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		pause := 100 * time.Millisecond
		for ctx.Err() == nil {
			got, err := c.streamOnce(ctx, &lastID, yield)
			if err == errStopped {
				return
			}
			var perr *Error
			if ok := asError(err, &perr); ok && perr.Status < 500 && perr.Status != http.StatusTooManyRequests {
				yield(StreamEvent{}, err)
				return
			}
			if got {
				pause = 100 * time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
		}
	}
}

var errStopped = fmt.Errorf("rookery: the caller stopped the stream")

// streamOnce reads one connection's events; got says whether it delivered any (or its first id).
func (c *Client) streamOnce(ctx context.Context, lastID *string, yield func(StreamEvent, error) bool) (got bool, err error) {
	conn, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := newStallTimer(c.streamIdle, cancel) // the connection is dropped when it brings nothing for streamIdle
	defer quiet.stop()
	req, err := http.NewRequestWithContext(conn, http.MethodGet, c.base+"/v1/stream", nil)
	if err != nil {
		return false, err
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	req.Header.Set("Accept", "text/event-stream")
	for _, edit := range c.editors {
		if err := edit(ctx, req); err != nil {
			return false, err
		}
	}
	// No client timeout on a stream: it is meant to stay open.
	quiet.start()
	resp, err := c.streamHTTP.Do(req)
	quiet.stop()
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		return false, Check(resp, body[:n], nil)
	}
	sc := bufio.NewScanner(stallReader{r: resp.Body, wait: quiet})
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev StreamEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // the end of an event
			if ev.ID != "" {
				*lastID, got = ev.ID, true
			}
			if ev.Type != "" {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if !yield(ev, nil) {
					return got, errStopped
				}
			}
			ev, data = StreamEvent{}, nil
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
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return got, err
	}
	return got, ctx.Err()
}

// StreamTicketURL returns the URL a browser's EventSource opens the stream with (a single-use
// ticket from POST /v1/stream/tickets, valid for a minute).
func (c *Client) StreamTicketURL(ticket string) string {
	return c.base + "/v1/stream?ticket=" + url.QueryEscape(ticket)
}
