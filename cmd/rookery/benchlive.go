package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
)

// liveLoad is what `rookery bench --streams/--webhooks` adds to a run: streams held open and
// webhook receivers, with the server's memory before and after the streams opened.
type liveLoad struct {
	streams  *bench.Streams
	fast     *bench.Receiver
	second   *bench.Receiver // answering after a delay, or at once
	webhooks []string        // registered endpoints, deleted at the end
	c        *apiClient
	before   int64 // deliveries received when the measured run began
	began    time.Time
}

// startLive opens streams and starts the webhook receivers: the first answering at once, and a
// second answering after the delay second unless it is negative.
func startLive(ctx context.Context, c *apiClient, g graph.Graph, prefix string, seed uint64, streams int, webhooks bool, second time.Duration, out io.Writer) (*liveLoad, error) {
	l := &liveLoad{c: c}
	if webhooks {
		var err error
		if l.fast, err = l.receiver(ctx, 0); err != nil {
			l.close()
			return nil, err
		}
		if second >= 0 {
			if l.second, err = l.receiver(ctx, second); err != nil {
				l.close()
				return nil, err
			}
		}
		time.Sleep(1100 * time.Millisecond) // the webhooks consumers' copy of the endpoints
	}
	if streams > 0 {
		rss0, _ := l.rss(ctx)
		s, err := bench.OpenStreams(ctx, c.base, c.token, prefix, bench.StreamingUsers(g, streams, seed), out)
		if err != nil {
			l.close()
			return nil, err
		}
		l.streams = s
		time.Sleep(3 * time.Second) // let the server settle
		rss1, _ := l.rss(ctx)
		if rss0 > 0 && rss1 > 0 {
			fmt.Fprintf(out, "bench: %d streams open; the server's resident memory %.1f MiB -> %.1f MiB: %.1f KiB per stream\n",
				s.Open(), float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss1-rss0)/float64(streams)/1024)
		}
	}
	return l, nil
}

// receiver starts a receiver answering after delay and registers it for every event type.
func (l *liveLoad) receiver(ctx context.Context, delay time.Duration) (*bench.Receiver, error) {
	r, err := bench.StartReceiver("127.0.0.1:0", delay)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"url": r.URL(), "events": app.WebhookTypes, "description": "rookery bench"})
	reply, err := l.c.do(ctx, http.MethodPost, "/v1/webhooks", body)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("registering the bench's webhook receiver (the server needs --webhooks-allow-http --webhooks-allow-private): %w", err)
	}
	var w struct{ ID string }
	json.Unmarshal(reply, &w)
	l.webhooks = append(l.webhooks, w.ID)
	return r, nil
}

// rss reads the server's resident memory from its /metrics.
func (l *liveLoad) rss(ctx context.Context) (int64, error) {
	body, err := l.c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes on /metrics")
}

func (l *liveLoad) posted(id string, at time.Time) {
	if l.streams != nil {
		l.streams.Posted(id, at)
	}
}

// reset starts the measured run.
func (l *liveLoad) reset() {
	if l == nil {
		return
	}
	if l.streams != nil {
		l.streams.Reset()
	}
	if l.fast != nil {
		l.fast.Reset()
		l.before = l.fast.Count()
	}
	if l.second != nil {
		l.second.Reset()
	}
	l.began = time.Now()
}

// collect waits for the run's last events (up to 10 s after the run, until none arrive for a
// second) and adds the live figures to r.
func (l *liveLoad) collect(ctx context.Context, r *bench.Result, out io.Writer) {
	if l == nil {
		return
	}
	last := int64(-1)
	for i := 0; i < 10; i++ {
		n := int64(0)
		if l.streams != nil {
			n += l.streams.Events()
		}
		if l.fast != nil {
			n += l.fast.Count()
		}
		if n == last {
			break
		}
		last = n
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	if l.streams != nil {
		r.Ops[bench.OpStream] = l.streams.Result()
	}
	if l.fast != nil {
		r.Ops[bench.OpWebhook] = l.fast.Result()
		n := l.fast.Count() - l.before
		fmt.Fprintf(out, "bench: the webhook receiver got %d messages in %.1f s of load: %.0f/s\n", n, r.Duration, float64(n)/r.Duration)
	}
	if l.second != nil {
		r.Ops["webhook_second_lag"] = l.second.Result()
	}
}

func (l *liveLoad) close() {
	if l.streams != nil {
		l.streams.Close()
	}
	for _, id := range l.webhooks {
		l.c.do(context.Background(), http.MethodDelete, "/v1/webhooks/"+id, nil)
	}
	if l.fast != nil {
		l.fast.Close()
	}
	if l.second != nil {
		l.second.Close()
	}
}
