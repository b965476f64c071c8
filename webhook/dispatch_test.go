package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/webhook"
)

// queue is the dispatcher's view of the webhook queues, kept in memory: what app.App keeps in the
// table, reduced to what these tests look at (the app's own tests run the real one).
type queue struct {
	mu        sync.Mutex
	endpoints map[string]app.WebhookEndpoint
	waiting   []app.QueuedDelivery
	done      []string
}

func (q *queue) WebhookEndpoints(context.Context) ([]app.WebhookEndpoint, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []app.WebhookEndpoint
	for _, ep := range q.endpoints {
		out = append(out, ep)
	}
	return out, nil
}

func (q *queue) WebhookEndpoint(_ context.Context, id string) (app.WebhookEndpoint, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ep, ok := q.endpoints[id]
	if !ok {
		return ep, rookery.E("queue.WebhookEndpoint", rookery.NotFound, "no such endpoint")
	}
	return ep, nil
}

func (q *queue) DueDeliveries(_ context.Context, endpoint string, now time.Time, limit int) ([]app.QueuedDelivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []app.QueuedDelivery
	for _, d := range q.waiting {
		if d.Endpoint == endpoint && !d.Due.After(now) && d.Lease == 0 && len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}

func (q *queue) ClaimDeliveries(_ context.Context, ds []app.QueuedDelivery, until time.Time) ([]app.QueuedDelivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range ds {
		ds[i].Lease = until.UnixMilli()
		q.set(ds[i])
	}
	return ds, nil
}

func (q *queue) DeliveryDone(_ context.Context, d app.QueuedDelivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.remove(d.MessageID)
	q.done = append(q.done, d.MessageID)
	return nil
}

func (q *queue) RetryDelivery(_ context.Context, d app.QueuedDelivery, at time.Time, _ string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	d.Due, d.Attempts, d.Lease = at, d.Attempts+1, 0
	q.set(d)
	return nil
}

func (q *queue) DeadLetterDelivery(_ context.Context, d app.QueuedDelivery, _ string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.remove(d.MessageID)
	return nil
}

func (q *queue) add(d app.QueuedDelivery) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, d)
}

func (q *queue) setEndpoint(ep app.WebhookEndpoint) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.endpoints[ep.ID] = ep
}

func (q *queue) set(d app.QueuedDelivery) {
	for i := range q.waiting {
		if q.waiting[i].MessageID == d.MessageID {
			q.waiting[i] = d
		}
	}
}

func (q *queue) remove(id string) {
	q.waiting = slices.DeleteFunc(q.waiting, func(d app.QueuedDelivery) bool { return d.MessageID == id })
}

func (q *queue) attempts(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range q.waiting {
		if d.MessageID == id {
			return d.Attempts
		}
	}
	return -1
}

func (q *queue) delivered(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Contains(q.done, id)
}

// An endpoint whose URL failed until its circuit breaker opened is moved to a URL that answers:
// its deliveries go there at once, not after the old URL's cooldown.
func TestANewURLClosesTheBreaker(t *testing.T) {
	var down, up atomic.Int32
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		down.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer dead.Close()
	alive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		up.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer alive.Close()

	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	q := &queue{endpoints: map[string]app.WebhookEndpoint{}}
	q.setEndpoint(app.WebhookEndpoint{ID: "ep", URL: dead.URL, Enabled: true, Secrets: []string{secret}})
	// One failure opens the breaker for the first retry's delay, 10 s: far past this test's waits.
	d := webhook.New(webhook.Options{Queue: q, AllowPrivate: true, BreakAfter: 1, Poll: 10 * time.Millisecond,
		Retries: []time.Duration{10 * time.Second, 20 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)

	q.add(app.QueuedDelivery{Endpoint: "ep", MessageID: "msg_1", Type: "webhook.test", Body: []byte(`{}`), Due: time.Now()})
	d.Wake("ep")
	testenv.Eventually(t, 3*time.Second, "the failure that opens the breaker", func() bool { return q.attempts("msg_1") == 1 })
	time.Sleep(100 * time.Millisecond) // the breaker is updated right after the retry is recorded

	// While the breaker is open, what falls due fails without a request (the old URL's cooldown).
	q.add(app.QueuedDelivery{Endpoint: "ep", MessageID: "msg_2", Type: "webhook.test", Body: []byte(`{}`), Due: time.Now()})
	d.Wake("ep")
	time.Sleep(200 * time.Millisecond)
	if n := down.Load(); n != 1 {
		t.Fatalf("the open breaker let %d requests through; want the first only", n)
	}

	q.setEndpoint(app.WebhookEndpoint{ID: "ep", URL: alive.URL, Enabled: true, Secrets: []string{secret}})
	q.add(app.QueuedDelivery{Endpoint: "ep", MessageID: "msg_3", Type: "webhook.test", Body: []byte(`{}`), Due: time.Now()})
	d.Wake("ep")
	testenv.Eventually(t, 3*time.Second, "the delivery at the new URL", func() bool { return q.delivered("msg_3") })
	if n := down.Load(); n != 1 {
		t.Errorf("the old URL got %d requests; want 1", n)
	}
}
