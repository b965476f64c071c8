package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events/ddbrelay"
	"github.com/rookery/rookery/events/sqs"
	"github.com/rookery/rookery/internal/awsconf"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"

	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/nats"
)

type eventsConfig struct {
	backend    string
	natsURL    string
	natsPrefix string
	leaseTTL   time.Duration
	partitions int
	retain     time.Duration

	relay          string
	relayPoll      time.Duration
	yieldAfter     time.Duration
	yieldSet       bool // --background-yield was given (on the command line or in the environment)
	sqsEndpoint    string
	sqsRegion      string
	sqsPrefix      string
	sqsMaxReceives int
	sqsWait        time.Duration
	snsBatch       int
}

func (e *eventsConfig) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.backend, "events", "embedded", "event log: embedded (in the data dir), nats (JetStream) or sqs (an SNS FIFO topic and an SQS FIFO queue per consumer group)")
	f.StringVar(&e.natsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL, with --events nats")
	f.StringVar(&e.natsPrefix, "nats-prefix", "rookery", "prefix of the JetStream stream and subject names")
	f.DurationVar(&e.leaseTTL, "nats-lease-ttl", 5*time.Second, "with --events nats: how long a stopped process keeps its partitions of a consumer group before another process takes them over")
	e.addRelayFlags(f)
	f.DurationVar(&e.relayPoll, "relay-poll", 100*time.Millisecond, "with --relay poll: how often an idle relay queries the outbox partitions again (the stream relay reads each shard 4 times a second, within AWS's limit)")
	e.addSQSFlags(f)
	f.IntVar(&e.partitions, "event-partitions", 16, "partitions of a new event log (fixed once created)")
	f.DurationVar(&e.yieldAfter, "background-yield", 100*time.Millisecond, "while fan-out, timeline cleanup, live streams or webhooks work through a backlog of events older than this, the background consumers (counters, notifications, activities, leaderboards, erasure checks, export) handle one event at a time between them, so home feeds and streams stay fresh when the workers are saturated (0: never); unless given, only with the embedded log and the polling relay: elsewhere the pipeline's own latency (a DynamoDB stream, SNS to SQS) may pass it, so give a value above its p99")
	f.DurationVar(&e.retain, "event-retention", 24*time.Hour, "the embedded log deletes an event this long after it was appended, once every consumer has acked it (0: 24h; negative: keep every event)")
}

func (e *eventsConfig) addRelayFlags(f *pflag.FlagSet) {
	f.StringVar(&e.relay, "relay", "", "how the outbox reaches the event log: poll (the workers query the outbox partitions) or stream (with --store dynamo: the workers read the table's DynamoDB stream, which rookery migrate enables); empty: stream with --store dynamo, else poll")
}

// backgroundYield is the events.Runner's YieldAfter: --background-yield if it was given, else its
// default where an event's path from its write to its consumer is all in process (the embedded log
// fed by the polling relay), and 0 elsewhere, where that path's own latency may pass the default
// and make the background consumers yield to a foreground that keeps up.
func (e *eventsConfig) backgroundYield(c *config) time.Duration {
	if e.yieldSet || e.backend == "embedded" && e.relayKind(c) == "poll" {
		return e.yieldAfter
	}
	return 0
}

// relayKind is the relay the flags choose.
func (e *eventsConfig) relayKind(c *config) string {
	if e.relay != "" {
		return e.relay
	}
	if c.store == "dynamo" {
		return "stream" // fewer reads and a lower latency (docs/events.md)
	}
	return "poll"
}

func (e *eventsConfig) addSQSFlags(f *pflag.FlagSet) {
	f.StringVar(&e.sqsEndpoint, "sqs-endpoint", "", "with --events sqs: the SNS and SQS endpoint URL (an emulator's; empty: AWS's, by region)")
	f.StringVar(&e.sqsRegion, "sqs-region", "", "with --events sqs: AWS region (empty: from the AWS configuration, else us-east-1)")
	f.StringVar(&e.sqsPrefix, "sqs-prefix", "rookery", "with --events sqs: prefix of the topic and queue names (at most 20 of A-Z, a-z, 0-9, _ and -)")
	f.IntVar(&e.sqsMaxReceives, "sqs-max-receives", 20, "with --events sqs: receives of a message without an ack (its consumers crashed) before SQS moves it to the group's dead-letter queue")
	f.DurationVar(&e.sqsWait, "sqs-wait", 10*time.Second, "with --events sqs: long-poll time of a receive (1s to 20s); stopping waits for it")
	f.IntVar(&e.snsBatch, "sns-publish-batch", 10, "with --events sqs: events per SNS PublishBatch (1 to 10)")
}

// sqsOptions are the options of the SNS/SQS log: the application's consumer groups are created with
// the event types they handle. The analytics export's group is not among them: a worker with
// --export-dir creates it when it subscribes, so that a deployment without the export has no queue
// filling up with events nobody reads.
func (e *eventsConfig) sqsOptions(c *config, log *slog.Logger) sqs.Options {
	return sqs.Options{
		AWS:    awsconf.Options{Endpoint: e.sqsEndpoint, Region: e.sqsRegion, AccessKeyID: c.awsAccessKeyID, SecretAccessKey: c.awsSecretAccessKey},
		Prefix: e.sqsPrefix, Groups: groupTypes(), MaxReceives: e.sqsMaxReceives, WaitTime: e.sqsWait, PublishBatch: e.snsBatch, Logger: log,
	}
}

// relayFunc returns the outbox relay the flags choose, to run on the workers.
func (e *eventsConfig) relayFunc(ctx context.Context, c *config, store table.Table, ob *events.Outbox, l events.Log, log *slog.Logger) (func(context.Context) error, error) {
	ob.Poll = e.relayPoll
	switch e.relayKind(c) {
	case "poll":
		return func(ctx context.Context) error { return ob.Run(ctx) }, nil
	case "stream":
		if c.store != "dynamo" {
			return nil, fmt.Errorf("--relay stream reads a DynamoDB stream: it needs --store dynamo")
		}
		client, err := c.dynamoClient(ctx)
		if err != nil {
			return nil, err
		}
		streams, err := dynamo.NewStreamsClient(ctx, dynamo.ClientOptions{Endpoint: c.dynamoEndpoint, Region: c.dynamoRegion,
			AccessKeyID: c.awsAccessKeyID, SecretAccessKey: c.awsSecretAccessKey})
		if err != nil {
			return nil, err
		}
		host, _ := os.Hostname()
		r, err := ddbrelay.New(ctx, ddbrelay.Options{DynamoDB: client, Streams: streams, TableName: c.dynamoTable, Table: store,
			Outbox: ob, Log: l, Owner: fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano()), Logger: log})
		if err != nil {
			return nil, err
		}
		return r.Run, nil
	}
	return nil, fmt.Errorf("--relay must be poll or stream, not %q", e.relay)
}

// embeddedOptions are the options of the embedded log (package local places it).
func (e *eventsConfig) embeddedOptions(log *slog.Logger) embedded.Options {
	return embedded.Options{Partitions: e.partitions, Logger: log, Retain: e.retain, Groups: groupTypes()}
}

// groupTypes are the application's consumer groups with the event types each handles, for the logs
// that deliver a group only those (the SQS log's filter policies; the embedded log passes over the
// others). Groups not among them (the analytics export's) receive every type. A server always has
// home timelines.
func groupTypes() map[string][]string { return app.ConsumedTypes(true) }

// open opens the configured event log when it is not in the embedded store's engine: the NATS
// log, or the embedded log in the data directory's events/ (with --store dynamo).
func (e *eventsConfig) open(ctx context.Context, c *config, log *slog.Logger) (events.Log, error) {
	switch e.backend {
	case "embedded":
		opts := e.embeddedOptions(log)
		opts.Dir = filepath.Join(c.dataDir, "events")
		return embedded.Open(opts)
	case "nats":
		return nats.Open(ctx, nats.Options{URL: e.natsURL, Prefix: e.natsPrefix, Partitions: e.partitions, LeaseTTL: e.leaseTTL, Logger: log})
	case "sqs":
		return sqs.Open(ctx, e.sqsOptions(c, log))
	}
	return nil, fmt.Errorf("--events must be embedded, nats or sqs, not %q", e.backend)
}
