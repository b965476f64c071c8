package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/httpapi"
	"github.com/rookery/rookery/metrics"
	"github.com/rookery/rookery/webhook"
)

type serveConfig struct {
	events          eventsConfig
	timelines       timelinesConfig
	engagement      engagementConfig
	streams         streamsConfig
	webhooks        webhooksConfig
	rateLimits      rateLimitsConfig
	backup          backupConfig
	tracing         tracingConfig
	addr            string
	role            string
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	readTimeout     time.Duration
	writeTimeout    time.Duration
	pprofAddr       string
	gcPercent       int
	procs           int
	demo            bool
	deletedGrace    time.Duration
	corsOrigins     []string
}

func serveCmd(cfg *config, stdout, stderr io.Writer) *cobra.Command {
	var sc serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API (and, with --role all, the workers) until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc.events.yieldSet = cmd.Flags().Changed("background-yield")
			return serve(cmd.Context(), cfg, sc, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sc.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	f.StringVar(&sc.role, "role", "all", "all (API and workers), api, or worker")
	f.StringVar(&sc.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&sc.logFormat, "log-format", "text", "text or json")
	f.DurationVar(&sc.readTimeout, "http-read-timeout", 30*time.Second, "how long a client may take to send a request, body included")
	f.DurationVar(&sc.writeTimeout, "http-write-timeout", time.Minute, "how long a reply may take to write; a data export, which may take longer, gets this for each of its writes instead (a stream's writes have 10 s each)")
	f.DurationVar(&sc.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	f.IntVar(&sc.gcPercent, "gc-percent", 300, "Go's garbage collection target (GOGC): the heap may grow this many percent over live data before a collection; more trades memory for less GC CPU (a negative value turns the collector off)")
	f.IntVar(&sc.procs, "procs", 0, "goroutines Go runs at once (GOMAXPROCS); 0 is twice the CPUs the process may use (or the GOMAXPROCS environment variable if set): spare ones keep requests from waiting behind background work")
	f.StringVar(&sc.pprofAddr, "pprof-addr", "", "serve Go's profiler (/debug/pprof/) on this address; off when empty (keep it private)")
	f.DurationVar(&sc.deletedGrace, "deleted-grace", app.DefaultDeletedGrace, "how long a deleted account's username stays taken and its id unusable (DELETE /v1/users/{id})")
	f.StringSliceVar(&sc.corsOrigins, "cors-origins", nil, "origins whose web pages may call the API from the browser (CORS), comma-separated, such as https://app.example.com; * for any; none by default")
	f.BoolVar(&sc.demo, "demo", false, "DEMO ONLY: serve the demo web client at /demo/, which signs anyone in as any user without a password (embedded store and --role all only; never on a reachable address)")
	sc.events.addFlags(cmd)
	sc.timelines.addFlags(cmd.Flags())
	sc.engagement.addFlags(cmd.Flags())
	sc.streams.addFlags(cmd.Flags())
	sc.webhooks.addFlags(cmd.Flags())
	sc.rateLimits.addFlags(cmd.Flags())
	sc.backup.addFlags(cmd.Flags())
	sc.tracing.addFlags(cmd.Flags())
	cfg.addStoreFlags(cmd.Flags())
	cfg.addAuthFlags(cmd.Flags())
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// procs is how many goroutines the server has Go run at once: n if positive; else Go's own setting
// if GOMAXPROCS is set, or twice the CPUs the process may use. Go runs a goroutine for up to 10 ms
// before it preempts it, so with one per CPU, background work (the engine's compactions, the
// consumers) can hold every one for that long while requests wait; with spare ones, the kernel
// shares the CPUs among them at a finer grain: requests' tail latency falls and the consumers keep
// up under load, for a little more CPU a request (docs/performance.md).
func procs(n int, fromEnv bool) int {
	switch {
	case n > 0:
		return n
	case fromEnv:
		return startProcs
	}
	return 2 * startProcs
}

// startProcs is Go's setting when the process started, before serve changed it (tests run serve
// more than once in a process).
var startProcs = runtime.GOMAXPROCS(0)

// serve runs the server until ctx ends, then shuts down gracefully: it stops accepting, lets
// in-flight requests finish (up to the shutdown timeout), and closes the store.
func serve(ctx context.Context, cfg *config, sc serveConfig, stdout, stderr io.Writer) error {
	log, err := newLogger(stderr, sc.logLevel, sc.logFormat)
	if err != nil {
		return err
	}
	switch sc.role {
	case "all", "api", "worker":
	default:
		return fmt.Errorf("--role must be all, api or worker, not %q", sc.role)
	}
	for _, o := range sc.corsOrigins {
		if _, err := httpapi.ParseCORSOrigin(o); err != nil {
			return fmt.Errorf("--cors-origins: %v", err)
		}
	}
	debug.SetGCPercent(sc.gcPercent)
	runtime.GOMAXPROCS(procs(sc.procs, os.Getenv("GOMAXPROCS") != ""))
	clock := rookery.SystemClock
	verifier, cursorKey, err := cfg.verifier(clock)
	if err != nil {
		return err
	}
	m := metrics.New()
	b, err := openBackends(ctx, cfg, sc, clock, cursorKey, m, log)
	if err != nil {
		return err
	}
	defer b.close(log) // after every component has stopped
	store, evlog, timelines := b.store, b.log, b.timelines
	newID := func() string { return ulid.Make().String() }
	outbox := b.outbox(clock, log)

	streamOpts, streams, closeBus, err := sc.streams.open(sc.events, sc.timelines, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeBus(); err != nil {
			log.Error("closing the stream bus", "err", err)
		}
	}()
	// Streams end when shutdown begins: they would hold it up for its whole timeout.
	stopStreams := make(chan struct{})
	streamOpts.Stop = stopStreams
	limits, err := sc.rateLimits.limits(sc.engagement.cache, sc.timelines.redisAddr, sc.timelines.redisPrefix)
	if err != nil {
		return err
	}
	tracing, stopTracing, err := sc.tracing.start(ctx, sc.role)
	if err != nil {
		return err
	}
	defer func() { // after every component has stopped: their last spans are flushed
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("flushing the last traces failed", "err", err)
		}
	}()
	deps := httpapi.Deps{
		WriteTimeout: sc.writeTimeout,
		CORS:         httpapi.CORS{Origins: sc.corsOrigins},
		Tracing:      tracing,
		Limits:       limits,
		Backup:       b.backup(sc.backup, cfg),
		Streams:      streamOpts,
		Verifier:     verifier,
		Metrics:      m,
		Log:          log,
		NewID:        newID,
		Ready:        b.ready,
	}
	eng, err := sc.engagement.engagement(clock, sc.role, sc.timelines.redisAddr, sc.timelines.redisPrefix, log)
	if err != nil {
		return err
	}
	var dispatcher *webhook.Dispatcher // made below, with the App whose queues it delivers
	application := app.New(app.Deps{Table: store, Events: evlog, Outbox: outbox, Clock: clock, IDs: newID,
		Timelines: timelines, CelebrityThreshold: sc.timelines.celebrityThreshold, TimelineCap: sc.timelines.cap,
		Engagement: eng, Logger: log, OnRebuild: m.ObserveRebuild, CursorKey: cursorKey, Streams: streams,
		OtherGroups: []string{ExportGroup}, WebhookPolicy: sc.webhooks.policy(), StreamPresenceDelay: sc.streams.presenceDelay(sc.events),
		StreamTable:       b.streamTable,
		UnsyncedConsumers: b.direct,
		FollowerCacheIDs:  followerCache(cfg, sc),
		SoleWriter:        cfg.store == "pebble",
		PostCacheTTL:      postCacheTTL(cfg, sc),
		PostCacheSize:     sc.engagement.postCacheN,
		BilledReads:       cfg.store == "dynamo",
		OnPostCacheRead:   m.ObservePostCache,
		FeedPages:         sc.timelines.feedPages,
		OnFeedPageRead:    m.ObserveFeedPage,
		DeletedGrace:      sc.deletedGrace,
		IndexLag:          indexLag(cfg.store),
		OnWebhookQueued: func(endpoint string) {
			if dispatcher != nil {
				dispatcher.Wake(endpoint)
			}
		}})
	consumers := application.Consumers()
	if sc.role != "api" {
		exporter, cs, err := sc.engagement.exporter(ctx, cfg, log)
		if err != nil {
			return err
		}
		if exporter != nil {
			defer func() {
				if err := exporter.Close(); err != nil {
					log.Error("closing the analytics export", "err", err)
				}
			}()
			consumers = append(consumers, cs...)
		}
	}
	if sc.role != "worker" {
		deps.App = application
	}
	var components []component
	if sc.role != "api" {
		relay, err := sc.events.relayFunc(ctx, cfg, b.store, outbox, evlog, log)
		if err != nil {
			return err
		}
		components = pipeline(relay, evlog, consumers, sc.events.backgroundYield(cfg), m, log, tracing)
		if dispatcher, err = sc.webhooks.dispatcher(application, m, log); err != nil {
			return err
		}
		components = append(components, untilStopped("webhook dispatcher", log, dispatcher.Run))
	}
	handler := httpapi.NewServer(deps)
	if sc.demo {
		if cfg.store != "pebble" || sc.role != "all" {
			return errors.New("--demo runs only on the embedded store with --role all: it signs anyone in as any user")
		}
		secret, err := cfg.secret(false)
		if err != nil || secret == nil {
			return fmt.Errorf("--demo needs the HS256 secret to mint sessions: %v", err)
		}
		handler = demo(handler, application, secret, log)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       sc.readTimeout,
		WriteTimeout:      sc.writeTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(stopStreams) })
	ln, err := net.Listen("tcp", sc.addr)
	if err != nil {
		return err
	}
	// Scripts and tests read this line to learn the address (with --addr 127.0.0.1:0, the port).
	fmt.Fprintf(stdout, "rookery %s listening on http://%s (store %s, events %s, role %s)\n", version, ln.Addr(), cfg.store, sc.events.backend, sc.role)

	if sc.pprofAddr != "" {
		pl, err := net.Listen("tcp", sc.pprofAddr)
		if err != nil {
			return fmt.Errorf("--pprof-addr: %w", err)
		}
		defer pl.Close()
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		go http.Serve(pl, mux)
		log.Info("profiler listening", "addr", pl.Addr().String())
	}

	components = append(components, component{name: "http server",
		run: func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
		stop: func(error) {
			log.Info("shutting down", "timeout", sc.shutdownTimeout)
			sctx, cancel := context.WithTimeout(context.Background(), sc.shutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				log.Error("shutdown", "err", err)
			}
		}})
	// Everything stops together, when ctx ends or one part fails; the closes deferred above run
	// after every part has returned.
	if err := runComponents(ctx, log, components...); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// followerCache is the size of fan-out's cache of follower lists: only with the embedded store,
// which no other process writes (app.Deps.FollowerCacheIDs).
func followerCache(cfg *config, sc serveConfig) int {
	if cfg.store != "pebble" {
		return 0
	}
	return sc.timelines.followerCache
}

// postCacheTTL is how long the reads that render posts keep copies of them
// (app.Deps.PostCacheTTL): on the embedded store in process (its only writer), on DynamoDB in the
// engagement cache, only if every process writing posts shares it.
func postCacheTTL(cfg *config, sc serveConfig) time.Duration {
	if cfg.store == "dynamo" && sc.engagement.cache == "memory" && sc.role != "all" {
		return 0
	}
	return sc.engagement.postCache
}

// indexLag is how long the store's index queries may lag its writes.
func indexLag(store string) time.Duration {
	if store == "dynamo" {
		return app.DynamoIndexLag
	}
	return 0
}
