package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

// Queue is the webhook queues as the dispatcher works them (app.App).
type Queue interface {
	WebhookEndpoints(ctx context.Context) ([]app.WebhookEndpoint, error)
	WebhookEndpoint(ctx context.Context, id string) (app.WebhookEndpoint, error)
	DueDeliveries(ctx context.Context, endpoint string, now time.Time, limit int) ([]app.QueuedDelivery, error)
	ClaimDeliveries(ctx context.Context, ds []app.QueuedDelivery, until time.Time) ([]app.QueuedDelivery, error)
	DeliveryDone(ctx context.Context, d app.QueuedDelivery) error
	RetryDelivery(ctx context.Context, d app.QueuedDelivery, at time.Time, lastErr string) error
	DeadLetterDelivery(ctx context.Context, d app.QueuedDelivery, reason string) error
}

// Options configure a Dispatcher.
type Options struct {
	Queue  Queue
	Clock  rookery.Clock // nil means the system clock
	Logger *slog.Logger  // nil logs nothing
	// Observe, if set, is told each attempt's endpoint, outcome (delivered, retried, dead) and
	// latency; Backlog, each poll's count of an endpoint's due deliveries (up to a page).
	Observe func(endpoint, outcome string, took time.Duration)
	Backlog func(endpoint string, due int)
	// Concurrency is how many deliveries to one endpoint run at once in this process; 0 means 32.
	Concurrency int
	// Timeout is how long an endpoint has to answer; 0 means 10 s.
	Timeout time.Duration
	// Retries are the delays before each retry of a failed delivery (timeouts, 5xx, 429, 408,
	// connection failures); after the last, the delivery is dead-lettered. Nil means the default
	// schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about 28 hours in all).
	Retries []time.Duration
	// Poll is how often the queues are looked at when nothing wakes the dispatcher; 0 means 250 ms.
	Poll time.Duration
	// AllowPrivate lets deliveries connect to non-public addresses (development and tests); by
	// default an endpoint whose name resolves to one is refused when connecting.
	AllowPrivate bool
	// BreakAfter consecutive failures of an endpoint open its circuit breaker: for a cooldown (from
	// the first retry delay, doubling to 5 min or half the longest delay) its deliveries fail as
	// they fall due without a request, each on its own retry schedule; then one is tried. 0 means 5.
	BreakAfter int
}

// DefaultRetries is the default retry schedule.
var DefaultRetries = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// excerptMax is the most of a response body kept (for a dead letter's reason and the logs).
const excerptMax = 256

// Dispatcher delivers the queues of every enabled endpoint: each endpoint's deliveries run
// independently of the others' (its own concurrency and breaker), so one slow or dead endpoint
// delays nobody else. Processes may run several: a delivery is claimed with a lease first.
type Dispatcher struct {
	o      Options
	client *http.Client
	wake   chan struct{}

	mu    sync.Mutex
	state map[string]*endpointState // of the endpoints known
	stale bool                      // a delivery was queued for an endpoint not known yet, or one changed
	wg    sync.WaitGroup
}

type endpointState struct {
	inFlight  int
	failures  int // consecutive
	openUntil time.Time
	cooldown  time.Duration
	last      string // the last failure, which an open breaker gives as the reason of its own
	url       string // the endpoint's URL that failures were counted for
}

// New returns a Dispatcher.
func New(o Options) *Dispatcher {
	if o.Clock == nil {
		o.Clock = rookery.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = func(string, string, time.Duration) {}
	}
	if o.Backlog == nil {
		o.Backlog = func(string, int) {}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Retries == nil {
		o.Retries = DefaultRetries
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.BreakAfter <= 0 {
		o.BreakAfter = 5
	}
	dialer := &net.Dialer{Timeout: o.Timeout, Control: func(network, address string, _ syscall.RawConn) error {
		return checkDial(address, o.AllowPrivate)
	}}
	transport := &http.Transport{
		Proxy:               nil, // an environment's proxy would connect where the check cannot see
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: o.Concurrency,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: o.Timeout,
	}
	return &Dispatcher{o: o, wake: make(chan struct{}, 1), state: map[string]*endpointState{},
		client: &http.Client{Transport: transport, Timeout: o.Timeout,
			// A redirect is not followed: it could lead anywhere, and the endpoint should be registered
			// at its final URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// checkDial refuses a connection to a non-public address unless allowed: it runs on the address
// being connected to, after the name resolved, so a name that resolves to a private address (or
// is rebound to one after registration) is refused too.
func checkDial(address string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !app.PublicAddr(addr) {
		return fmt.Errorf("refused to connect to %s: not a public address (--webhooks-allow-private allows it)", host)
	}
	return nil
}

// Wake makes the dispatcher look at the queues now (app.Deps.OnWebhookQueued): endpoint's, and
// the endpoints again if endpoint is new to it.
func (d *Dispatcher) Wake(endpoint string) {
	if endpoint != "" {
		d.mu.Lock()
		if _, known := d.state[endpoint]; !known {
			d.stale = true
		}
		d.mu.Unlock()
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the deliveries under way.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.wg.Wait()
	ticker := time.NewTicker(d.o.Poll)
	defer ticker.Stop()
	var endpoints []app.WebhookEndpoint
	var fetched time.Time
	for {
		now := d.o.Clock.Now()
		d.mu.Lock()
		stale := d.stale
		d.stale = false
		d.mu.Unlock()
		if stale || now.Sub(fetched) > 2*time.Second || fetched.IsZero() {
			eps, err := d.o.Queue.WebhookEndpoints(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d.o.Logger.Warn("reading the webhook endpoints", "err", err)
			} else {
				endpoints, fetched = eps, now
				d.mu.Lock()
				for _, ep := range eps {
					if d.state[ep.ID] == nil {
						d.state[ep.ID] = &endpointState{}
					}
				}
				d.mu.Unlock()
			}
		}
		for _, ep := range endpoints {
			if ep.Enabled {
				d.poll(ctx, ep, now)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-d.wake:
		}
	}
}

// poll claims what endpoint ep may start now and starts it.
func (d *Dispatcher) poll(ctx context.Context, ep app.WebhookEndpoint, now time.Time) {
	d.mu.Lock()
	st := d.state[ep.ID]
	if st == nil {
		st = &endpointState{}
		d.state[ep.ID] = st
	}
	free := d.o.Concurrency - st.inFlight
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	due, err := d.o.Queue.DueDeliveries(ctx, ep.ID, now, free)
	if err != nil {
		if ctx.Err() == nil {
			d.o.Logger.Warn("reading a webhook queue", "endpoint", ep.ID, "err", err)
		}
		return
	}
	d.o.Backlog(ep.ID, len(due))
	if len(due) == 0 {
		return
	}
	// The endpoint as it is now, not as the list read up to 2 s ago has it: a delivery goes to the
	// URL, signed with the secrets, that the endpoint has when it is attempted (a client that
	// changes the URL and then asks for a test message gets it at the new one).
	cur, err := d.o.Queue.WebhookEndpoint(ctx, ep.ID)
	if err != nil && !rookery.IsKind(err, rookery.NotFound) {
		if ctx.Err() == nil {
			d.o.Logger.Warn("reading a webhook endpoint", "endpoint", ep.ID, "err", err)
		}
		return
	}
	if err != nil || !cur.Enabled { // deleted or disabled since the list was read
		d.mu.Lock()
		d.stale = true
		d.mu.Unlock()
		return
	}
	ep = cur
	d.mu.Lock()
	if st.url != ep.URL { // a new URL is a new server: the failures of the old one do not count
		st.url, st.failures, st.cooldown, st.openUntil = ep.URL, 0, 0, time.Time{}
	}
	// An open breaker fails what falls due without a request: each delivery still goes through
	// its retries on its own schedule, to the dead letters if the endpoint stays down.
	open := now.Before(st.openUntil)
	reason := "the endpoint's circuit breaker is open after " + strconv.Itoa(st.failures) + " failures in a row; the last: " + st.last
	if !open && st.failures >= d.o.BreakAfter {
		free = min(free, 1-st.inFlight) // half-open: one trial at a time
	}
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	due = due[:min(len(due), free)]
	held, err := d.o.Queue.ClaimDeliveries(ctx, due, now.Add(2*d.o.Timeout+5*time.Second)) // past the attempt and its settling
	if err != nil && ctx.Err() == nil {
		d.o.Logger.Warn("claiming webhook deliveries", "endpoint", ep.ID, "err", err)
	}
	for _, del := range held { // the others another dispatcher has
		d.mu.Lock()
		st.inFlight++
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if open {
				d.settle(ctx, ep, del, 0, reason, false, 0)
				d.mu.Lock()
				st.inFlight--
				d.mu.Unlock()
				return
			}
			d.deliver(ctx, ep, del)
		}()
	}
}

// deliver makes one attempt at del and settles it.
func (d *Dispatcher) deliver(ctx context.Context, ep app.WebhookEndpoint, del app.QueuedDelivery) {
	start := time.Now()
	retryAfter, failure, permanent := d.post(ctx, ep, del)
	d.settle(ctx, ep, del, retryAfter, failure, permanent, time.Since(start))
	d.breaker(ep.ID, failure == "" || permanent, failure)
	d.Wake("") // the endpoint has a free slot: look at its queue now
}

// settle records the outcome of an attempt at del: done, retried later, or dead-lettered.
func (d *Dispatcher) settle(ctx context.Context, ep app.WebhookEndpoint, del app.QueuedDelivery, retryAfter time.Duration, failure string, permanent bool, took time.Duration) {
	// Settling outlives a shutdown that began during the attempt, so that a delivery made is not
	// made again.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	outcome := "delivered"
	switch {
	case failure == "":
		err = d.o.Queue.DeliveryDone(sctx, del)
	case permanent || del.Attempts >= len(d.o.Retries):
		outcome = "dead"
		reason := failure
		if !permanent {
			reason = fmt.Sprintf("%s (attempt %d of %d)", failure, del.Attempts+1, len(d.o.Retries)+1)
		}
		err = d.o.Queue.DeadLetterDelivery(sctx, del, reason)
	default:
		outcome = "retried"
		delay := max(d.o.Retries[del.Attempts], min(retryAfter, time.Hour))
		err = d.o.Queue.RetryDelivery(sctx, del, d.o.Clock.Now().Add(delay), failure)
	}
	if err != nil {
		d.o.Logger.Warn("settling a webhook delivery; it is tried again when its lease ends", "endpoint", ep.ID, "msg", del.MessageID, "err", err)
	}
	if failure != "" {
		d.o.Logger.Info("webhook delivery failed", "endpoint", ep.ID, "msg", del.MessageID, "attempt", del.Attempts+1, "outcome", outcome, "why", failure)
	}
	d.o.Observe(ep.ID, outcome, took)
}

// breaker updates the endpoint's breaker after an attempt (ok: it answered, whatever it said).
func (d *Dispatcher) breaker(endpoint string, ok bool, failure string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state[endpoint]
	st.inFlight--
	if ok {
		st.failures, st.cooldown = 0, 0
		return
	}
	st.failures++
	st.last = failure
	if st.failures >= d.o.BreakAfter {
		st.cooldown = min(max(2*st.cooldown, d.o.Retries[0]), d.maxCooldown())
		st.openUntil = d.o.Clock.Now().Add(st.cooldown)
		d.o.Logger.Warn("webhook endpoint keeps failing: its circuit breaker is open", "endpoint", endpoint, "failures", st.failures, "cooldown", st.cooldown)
	}
}

// maxCooldown bounds an open breaker's cooldown: 5 minutes, or less for a short retry schedule,
// so that a delivery's later retries come after a trial request (an endpoint that answers again is
// found before they are spent).
func (d *Dispatcher) maxCooldown() time.Duration {
	return min(5*time.Minute, slices.Max(d.o.Retries)/2)
}

// post sends del to ep once. It returns "" if the endpoint took it (2xx); otherwise why not, and
// whether that is final (a 4xx other than 408 and 429, a redirect: retrying changes nothing).
func (d *Dispatcher) post(ctx context.Context, ep app.WebhookEndpoint, del app.QueuedDelivery) (retryAfter time.Duration, failure string, permanent bool) {
	if u, err := url.Parse(ep.URL); err != nil || u.Scheme != "https" && u.Scheme != "http" {
		return 0, "the endpoint's URL is not an http(s) URL", true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(del.Body))
	if err != nil {
		return 0, "the endpoint's URL does not make a request: " + err.Error(), true
	}
	ts := d.o.Clock.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Rookery-Webhooks/1")
	req.Header.Set("webhook-id", del.MessageID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(ep.Secrets, del.MessageID, ts, del.Body))
	resp, err := d.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, fmt.Sprintf("no answer within %s", d.o.Timeout), false
		}
		return 0, "could not connect: " + err.Error(), false
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptMax))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return 0, "", false
	case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
		return parseRetryAfter(resp.Header.Get("Retry-After"), d.o.Clock.Now()), fmt.Sprintf("HTTP %d: %q", s, excerpt), false
	default:
		return 0, fmt.Sprintf("HTTP %d: %q", s, excerpt), true
	}
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
