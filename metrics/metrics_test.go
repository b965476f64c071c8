package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery/metrics"
)

// TestConsumerOutcomes: each delivery counts under its outcome, and the retried and dead-lettered
// ones also as failures of their group.
func TestConsumerOutcomes(t *testing.T) {
	m := metrics.New()
	for _, o := range []string{"processed", "processed", "retried", "dead_lettered", "breaker_open"} {
		m.ObserveConsumer("fanout", o, time.Millisecond)
	}
	m.ObserveConsumer("counters", "processed", time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`rookery_consumer_events_total{group="fanout",outcome="processed"} 2`,
		`rookery_consumer_events_total{group="fanout",outcome="retried"} 1`,
		`rookery_consumer_events_total{group="fanout",outcome="dead_lettered"} 1`,
		`rookery_consumer_failures_total{group="fanout"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), `rookery_consumer_failures_total{group="counters"}`) {
		t.Error("a group with no failure has a failure count")
	}
}
