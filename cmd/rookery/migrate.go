package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events/sqs"
	"github.com/rookery/rookery/table/dynamo"
)

func migrateCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var timeout time.Duration
	var ev eventsConfig
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the DynamoDB table of --store dynamo (keys, every index, TTL) and the topic and queues of --events sqs; safe to run again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.store != "dynamo" && ev.backend != "sqs" {
				fmt.Fprintf(stdout, "migrate: nothing to do: migrate creates the DynamoDB table of --store dynamo (ROOKERY_STORE=dynamo) and the SNS topic and SQS queues of --events sqs; the %s store and the %s event log need no migration\n", cfg.store, ev.backend)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if cfg.store == "dynamo" {
				client, err := cfg.dynamoClient(ctx)
				if err != nil {
					return err
				}
				var opts []dynamo.MigrateOption
				if ev.relayKind(cfg) == "stream" {
					opts = append(opts, dynamo.WithStream())
				}
				if err := dynamo.Migrate(ctx, client, cfg.dynamoTable, app.Schema, func(step string) {
					fmt.Fprintln(stdout, "migrate:", step)
				}, opts...); err != nil {
					return err
				}
			}
			if ev.backend == "sqs" {
				o := ev.sqsOptions(cfg, nil)
				fmt.Fprintf(stdout, "migrate: SNS topic %s-events.fifo and an SQS queue with a dead-letter queue for each of %d consumer groups\n", o.Prefix, len(o.Groups))
				l, err := sqs.Open(ctx, o)
				if err != nil {
					return err
				}
				l.Close()
				fmt.Fprintln(stdout, "migrate: SNS/SQS ready")
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "how long to wait for the table and its indexes to become active")
	cmd.Flags().StringVar(&cfg.store, "store", "pebble", "the store: dynamo (migrate creates its table) or pebble (the embedded store, which needs no migration)")
	cmd.Flags().StringVar(&ev.backend, "events", "embedded", "the event log: sqs (migrate creates its topic and queues), or embedded or nats (which need no migration)")
	ev.addRelayFlags(cmd.Flags())
	ev.addSQSFlags(cmd.Flags())
	cfg.addDynamoFlags(cmd.Flags())
	return cmd
}
