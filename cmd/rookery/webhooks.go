package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/metrics"
	"github.com/rookery/rookery/webhook"
)

type webhooksConfig struct {
	allowHTTP    bool
	allowPrivate bool
	timeout      time.Duration
	concurrency  int
	retries      string
}

func (c *webhooksConfig) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.allowHTTP, "webhooks-allow-http", false, "let webhook endpoints use plain http (development and tests)")
	f.BoolVar(&c.allowPrivate, "webhooks-allow-private", false, "let webhook deliveries connect to loopback, private and other non-public addresses (development and tests)")
	f.DurationVar(&c.timeout, "webhooks-timeout", 10*time.Second, "how long a webhook endpoint has to answer")
	f.IntVar(&c.concurrency, "webhooks-concurrency", 32, "deliveries to one webhook endpoint at once, per worker process")
	f.StringVar(&c.retries, "webhooks-retries", "5s,5m,30m,2h,5h,10h,10h", "the delays before each retry of a failed webhook delivery, comma-separated; after the last, it goes to the dead-letter queue")
}

func (c *webhooksConfig) policy() app.WebhookPolicy {
	return app.WebhookPolicy{AllowHTTP: c.allowHTTP, AllowPrivate: c.allowPrivate}
}

// dispatcher returns the webhook dispatcher of the queues of q.
func (c *webhooksConfig) dispatcher(q webhook.Queue, m *metrics.Metrics, log *slog.Logger) (*webhook.Dispatcher, error) {
	var retries []time.Duration
	for _, s := range strings.Split(c.retries, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--webhooks-retries: %q is not a positive duration", s)
		}
		retries = append(retries, d)
	}
	return webhook.New(webhook.Options{Queue: q, Logger: log, Observe: m.ObserveWebhook, Backlog: m.SetWebhookBacklog,
		Concurrency: c.concurrency, Timeout: c.timeout, Retries: retries, AllowPrivate: c.allowPrivate}), nil
}
