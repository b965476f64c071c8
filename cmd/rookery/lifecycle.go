package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	oklog "github.com/oklog/run"
	"go.opentelemetry.io/otel/trace"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/metrics"
)

// component is one long-running part of serve (the HTTP server, the outbox relay, a consumer): run
// works until it is stopped or fails, and stop makes it return (an execute/interrupt pair of
// oklog/run).
type component struct {
	name string
	run  func() error
	stop func(error)
}

// runComponents runs every component until ctx ends or one of them returns, then stops all of them
// and waits for each to return. It returns the first component's error, nil if ctx ended first.
func runComponents(ctx context.Context, log *slog.Logger, cs ...component) error {
	var g oklog.Group
	ctx, cancel := context.WithCancel(ctx)
	stopped := errors.New("stopped")
	g.Add(func() error { <-ctx.Done(); return stopped }, func(error) { cancel() })
	for _, c := range cs {
		g.Add(func() error {
			err := c.run()
			if err != nil {
				log.Error("a component stopped", "component", c.name, "err", err)
			}
			return err
		}, c.stop)
	}
	if err := g.Run(); !errors.Is(err, stopped) {
		return err
	}
	return nil
}

// untilStopped is a component that runs work(ctx) until it is stopped (its error is logged, not
// returned: a consumer that stops must not bring the server down).
func untilStopped(name string, log *slog.Logger, work func(ctx context.Context) error) component {
	ctx, cancel := context.WithCancel(context.Background())
	return component{name: name, run: func() error {
		if err := work(ctx); err != nil && ctx.Err() == nil {
			log.Error("stopped", "component", name, "err", err)
		}
		<-ctx.Done()
		return nil
	}, stop: func(error) { cancel() }}
}

// pipeline is the worker's components: the outbox relay (relay runs it), and for each consumer its
// runner and a poller of its lag (for the metrics).
func pipeline(relay func(context.Context) error, l events.Log, consumers []events.Consumer, yieldAfter time.Duration, m *metrics.Metrics, log *slog.Logger, tracing trace.TracerProvider) []component {
	cs := []component{untilStopped("outbox relay", log, relay)}
	runner := &events.Runner{
		Log: l, Logger: log, Tracing: tracing, YieldAfter: yieldAfter,
		Stats: func(group string, o events.Outcome, took time.Duration) { m.ObserveConsumer(group, string(o), took) },
		Age:   m.ObserveEventAge,
	}
	for _, c := range consumers {
		cs = append(cs, untilStopped("consumer "+c.Group, log, func(ctx context.Context) error { return runner.Run(ctx, c) }))
		cs = append(cs, untilStopped("lag of "+c.Group, log, func(ctx context.Context) error {
			// Every second, so that "caught up within 5 s" can be read off the metric.
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
					if n, oldest, err := l.Lag(ctx, c.Group); err == nil {
						m.SetLag(c.Group, n, oldest, rookery.SystemClock.Now())
					}
				}
			}
		}))
	}
	return cs
}
