package nats_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/events/nats"
)

// The tests use the NATS server on 127.0.0.1:4222 (or ROOKERY_TEST_NATS_URL), which .ci/run starts
// if it is not running; each test has streams of its own, deleted when it ends. A server that does
// not answer fails the tests: they never skip.
func url() string {
	if u := os.Getenv("ROOKERY_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

var seq atomic.Int64

func open(t testing.TB) *nats.Log { return openParts(t, 4) }

func openParts(t testing.TB, parts int) *nats.Log {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("rookerytest_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
	l, err := nats.Open(ctx, nats.Options{URL: url(), Prefix: prefix, Partitions: parts})
	if err != nil {
		t.Fatalf("NATS JetStream at %s: %v", url(), err)
	}
	t.Cleanup(func() {
		if err := l.Destroy(ctx); err != nil {
			t.Errorf("deleting streams of %s: %v", prefix, err)
		}
		l.Close()
	})
	return l
}

func TestConformance(t *testing.T) {
	eventstest.Run(t, func(t testing.TB) events.Log { return open(t) })
}
