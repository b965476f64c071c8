package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table/dynamo"
)

func migrateCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the DynamoDB table of --store dynamo (keys, every index, TTL); safe to run again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.store != "dynamo" {
				fmt.Fprintf(stdout, "migrate: nothing to do: migrate creates the DynamoDB table of --store dynamo (ROOKERY_STORE=dynamo); the %s store needs no migration\n", cfg.store)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			client, err := cfg.dynamoClient(ctx)
			if err != nil {
				return err
			}
			return dynamo.Migrate(ctx, client, cfg.dynamoTable, app.Schema, func(step string) {
				fmt.Fprintln(stdout, "migrate:", step)
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "how long to wait for the table and its indexes to become active")
	cmd.Flags().StringVar(&cfg.store, "store", "pebble", "the store: dynamo (migrate creates its table) or pebble (the embedded store, which needs no migration)")
	cfg.addDynamoFlags(cmd.Flags())
	return cmd
}
