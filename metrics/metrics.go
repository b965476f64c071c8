// Package metrics owns Rookery's Prometheus metrics: one registry, the collectors every part
// reports to, and the /metrics handler. Other packages receive plain functions (table.Observer, a
// capacity callback) or this type, never the Prometheus client itself.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rookery/rookery"
)

// Metrics holds the registry and the collectors.
type Metrics struct {
	reg *prometheus.Registry

	HTTPDuration *prometheus.HistogramVec // route, method, status
	HTTPInFlight prometheus.Gauge
	StoreOps     *prometheus.HistogramVec // op
	StoreErrors  *prometheus.CounterVec   // op, kind
	Capacity     *prometheus.CounterVec   // op, kind (read|write)

	ConsumerEvents     *prometheus.CounterVec   // group, outcome
	ConsumerFailures   *prometheus.CounterVec   // group
	ConsumerLatency    *prometheus.HistogramVec // group
	EventAge           *prometheus.HistogramVec // group, type
	ConsumerLag        *prometheus.GaugeVec     // group
	ConsumerLagSeconds *prometheus.GaugeVec     // group
	TimelineRebuilds   *prometheus.CounterVec   // outcome
	PostCacheReads     *prometheus.CounterVec   // kind: post, author; outcome: hit, miss
	FeedPageReads      *prometheus.CounterVec   // outcome: hit, miss
	feedPageHit        prometheus.Counter       // FeedPageReads' two, resolved once: every feed read counts
	feedPageMiss       prometheus.Counter

	StreamsOpen   prometheus.Gauge
	StreamEvents  *prometheus.CounterVec // type
	StreamDrops   *prometheus.CounterVec // reason: behind (its buffer filled), stalled (a write failed)
	StreamResumes *prometheus.CounterVec // outcome: new, resumed (Last-Event-ID), reset

	WebhookDeliveries *prometheus.CounterVec   // endpoint, outcome: delivered, retried, dead
	WebhookLatency    *prometheus.HistogramVec // endpoint
	WebhookBacklog    *prometheus.GaugeVec     // endpoint
}

// New returns Metrics registered on a fresh registry, with Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		WebhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_webhook_deliveries_total",
			Help: "Webhook delivery attempts by endpoint and outcome: delivered, retried (it failed and waits for its next attempt) or dead (dead-lettered).",
		}, []string{"endpoint", "outcome"}),
		WebhookLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rookery_webhook_delivery_seconds",
			Help:    "Webhook delivery attempt latency (the endpoint's answer) by endpoint.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint"}),
		WebhookBacklog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rookery_webhook_backlog",
			Help: "Webhook deliveries due for an endpoint and not yet taken, as this process last saw (up to its free slots).",
		}, []string{"endpoint"}),
		StreamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_streams_open",
			Help: "Streams (GET /v1/stream) open on this process.",
		}),
		StreamEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_stream_events_sent_total",
			Help: "Stream events sent to clients, by type.",
		}, []string{"type"}),
		StreamDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_stream_clients_dropped_total",
			Help: "Streams ended by the server because the client fell behind (behind) or stopped reading (stalled).",
		}, []string{"reason"}),
		StreamResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_stream_starts_total",
			Help: "Streams opened: new (no Last-Event-ID), resumed (every missed event replayed) or reset (beyond the window).",
		}, []string{"outcome"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rookery_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern, method and status.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method", "status"}),
		HTTPInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
		StoreOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rookery_store_operation_duration_seconds",
			Help:    "Table operation latency by operation.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5},
		}, []string{"op"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_store_errors_total",
			Help: "Table operations that failed, by operation and error kind.",
		}, []string{"op", "kind"}),
		Capacity: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_dynamodb_consumed_capacity_units_total",
			Help: "DynamoDB capacity units consumed, by operation and kind (read or write).",
		}, []string{"op", "kind"}),
	}
	m.ConsumerEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_consumer_events_total",
		Help: "Events handled by consumer group and outcome (processed, retried, dead_lettered, breaker_open).",
	}, []string{"group", "outcome"})
	m.ConsumerFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_consumer_failures_total",
		Help: "Handler failures by consumer group: the deliveries retried or dead-lettered.",
	}, []string{"group"})
	m.ConsumerLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rookery_consumer_handler_duration_seconds",
		Help:    "Consumer handler latency by group.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
	}, []string{"group"})
	m.EventAge = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rookery_event_age_at_handling_seconds",
		Help:    "Time from an event's occurrence to the end of its handling, by consumer group and event type; for fanout and PostCreated, the fan-out lag (post accepted to in every follower's timeline).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
	}, []string{"group", "type"})
	m.ConsumerLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rookery_consumer_lag_events",
		Help: "Events appended but not yet handled, by consumer group.",
	}, []string{"group"})
	m.ConsumerLagSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rookery_consumer_lag_seconds",
		Help: "Age of the oldest event not yet handled, by consumer group.",
	}, []string{"group"})
	m.TimelineRebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_timeline_rebuilds_total",
		Help: "Home timelines rebuilt by the read path, by outcome: complete, failed (the build stays unread and the next read builds it again), superseded (another build completed it).",
	}, []string{"outcome"})
	m.PostCacheReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_post_cache_reads_total",
		Help: "Posts and authors looked up in the post cache (--post-cache-ttl) to render posts, by kind (post, author) and outcome: hit, or miss (read from the table).",
	}, []string{"kind", "outcome"})
	m.FeedPageReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_feed_page_reads_total",
		Help: "Home feed reads by whether their page was kept (--feed-pages) and served again: hit, or miss (made from its sources).",
	}, []string{"outcome"})
	m.feedPageHit, m.feedPageMiss = m.FeedPageReads.WithLabelValues("hit"), m.FeedPageReads.WithLabelValues("miss")
	m.reg.MustRegister(m.PostCacheReads, m.FeedPageReads, m.HTTPDuration, m.HTTPInFlight, m.StoreOps, m.StoreErrors, m.Capacity,
		m.ConsumerEvents, m.ConsumerFailures, m.ConsumerLatency, m.EventAge, m.ConsumerLag, m.ConsumerLagSeconds, m.TimelineRebuilds,
		m.StreamsOpen, m.StreamEvents, m.StreamDrops, m.StreamResumes,
		m.WebhookDeliveries, m.WebhookLatency, m.WebhookBacklog,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// EngineStats are the embedded engine's figures (table/pebble.EngineStats).
type EngineStats struct {
	WALBytes, FlushedBytes, CompactedBytes, DiskBytes uint64
	L0Tables                                          int64
	WALSyncBounds                                     []float64
	WALSyncCounts                                     []uint64
	WALSyncSeconds                                    float64
}

// WatchEngine exports the figures stats returns, read once at each scrape: the bytes the embedded
// engine wrote by kind (wal, flush, compaction), its disk use, its level-0 tables and how long its
// write-ahead log's syncs took.
func (m *Metrics) WatchEngine(stats func() EngineStats) { m.reg.MustRegister(engineCollector(stats)) }

var (
	engineWritten = prometheus.NewDesc("rookery_engine_written_bytes_total",
		"Bytes the embedded store's engine wrote, by kind: wal (its write-ahead log), flush (memtables to tables), compaction (tables rewritten).",
		[]string{"kind"}, nil)
	engineDisk = prometheus.NewDesc("rookery_engine_disk_bytes", "Bytes the embedded store's engine holds on disk.", nil, nil)
	engineL0   = prometheus.NewDesc("rookery_engine_l0_tables",
		"Tables in level 0 of the embedded store's engine (writes stall when they pile up).", nil, nil)
	engineWALSyncs = prometheus.NewDesc("rookery_engine_wal_sync_seconds",
		"How long the embedded store's engine took to sync its write-ahead log: a synced commit (a request's write) waits for one.", nil, nil)
)

// engineCollector collects the engine's figures from one call of itself per scrape.
type engineCollector func() EngineStats

func (engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- engineWritten
	ch <- engineDisk
	ch <- engineL0
	ch <- engineWALSyncs
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c()
	for kind, v := range map[string]uint64{"wal": s.WALBytes, "flush": s.FlushedBytes, "compaction": s.CompactedBytes} {
		ch <- prometheus.MustNewConstMetric(engineWritten, prometheus.CounterValue, float64(v), kind)
	}
	ch <- prometheus.MustNewConstMetric(engineDisk, prometheus.GaugeValue, float64(s.DiskBytes))
	ch <- prometheus.MustNewConstMetric(engineL0, prometheus.GaugeValue, float64(s.L0Tables))
	if n := len(s.WALSyncCounts); n > 0 {
		buckets := make(map[float64]uint64, n)
		for i, bound := range s.WALSyncBounds {
			buckets[bound] = s.WALSyncCounts[i]
		}
		ch <- prometheus.MustNewConstHistogram(engineWALSyncs, s.WALSyncCounts[n-1], s.WALSyncSeconds, buckets)
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveStore records one table operation; it has the shape of table.Observer.
func (m *Metrics) ObserveStore(op string, took time.Duration, err error) {
	m.StoreOps.WithLabelValues(op).Observe(took.Seconds())
	if err != nil {
		m.StoreErrors.WithLabelValues(op, rookery.KindOf(err).String()).Inc()
	}
}

// ObserveCapacity records DynamoDB consumed capacity; it has the shape of dynamo.Options.Capacity.
func (m *Metrics) ObserveCapacity(op string, read, write float64) {
	if read > 0 {
		m.Capacity.WithLabelValues(op, "read").Add(read)
	}
	if write > 0 {
		m.Capacity.WithLabelValues(op, "write").Add(write)
	}
}

// ObserveConsumer records one delivery's outcome (events.Stats, adapted in cmd).
func (m *Metrics) ObserveConsumer(group, outcome string, took time.Duration) {
	m.ConsumerEvents.WithLabelValues(group, outcome).Inc()
	if outcome == "retried" || outcome == "dead_lettered" {
		m.ConsumerFailures.WithLabelValues(group).Inc()
	}
	if outcome != "breaker_open" {
		m.ConsumerLatency.WithLabelValues(group).Observe(took.Seconds())
	}
}

// ObserveRebuild records the outcome of a timeline rebuild (app.Deps.OnRebuild).
func (m *Metrics) ObserveRebuild(outcome string) {
	m.TimelineRebuilds.WithLabelValues(outcome).Inc()
}

// ObservePostCache counts one read of the post cache (app.Deps.OnPostCacheRead).
func (m *Metrics) ObservePostCache(kind string, hits, misses int) {
	m.PostCacheReads.WithLabelValues(kind, "hit").Add(float64(hits))
	m.PostCacheReads.WithLabelValues(kind, "miss").Add(float64(misses))
}

// ObserveFeedPage counts one feed read (app.Deps.OnFeedPageRead).
func (m *Metrics) ObserveFeedPage(hit bool) {
	if hit {
		m.feedPageHit.Inc()
	} else {
		m.feedPageMiss.Inc()
	}
}

// ObserveEventAge records how old an event was when its handling ended (events.Runner.Age).
func (m *Metrics) ObserveEventAge(group, eventType string, age time.Duration) {
	m.EventAge.WithLabelValues(group, eventType).Observe(age.Seconds())
}

// SetLag records how far group is behind.
func (m *Metrics) SetLag(group string, events int64, oldest time.Time, now time.Time) {
	m.ConsumerLag.WithLabelValues(group).Set(float64(events))
	age := 0.0
	if !oldest.IsZero() {
		age = now.Sub(oldest).Seconds()
	}
	m.ConsumerLagSeconds.WithLabelValues(group).Set(age)
}

// ObserveWebhook records one webhook delivery attempt.
func (m *Metrics) ObserveWebhook(endpoint, outcome string, took time.Duration) {
	m.WebhookDeliveries.WithLabelValues(endpoint, outcome).Inc()
	m.WebhookLatency.WithLabelValues(endpoint).Observe(took.Seconds())
}

// SetWebhookBacklog records an endpoint's due deliveries.
func (m *Metrics) SetWebhookBacklog(endpoint string, due int) {
	m.WebhookBacklog.WithLabelValues(endpoint).Set(float64(due))
}
