package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// dlqCmd administers a consumer group's dead-letter queue through a running server's admin routes
// (/v1/admin/dlq), with a short-lived server token minted from the same configuration as `serve`.
// Going through the server works the same for the embedded log (which the server holds open) and
// for NATS.
func dlqCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var (
		server, group, after string
		limit                int
	)
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, show, replay or drop dead-lettered events of a consumer group",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&server, "server", "http://127.0.0.1:8080", "the running server's base URL")
	pf.StringVar(&group, "group", "", "the consumer group (required)")
	cfg.addClientFlags(pf)
	call := func(ctx context.Context, method, path string) ([]byte, error) {
		if group == "" {
			return nil, errors.New("--group is required")
		}
		c, err := newAPIClient(cfg, server, 1)
		if err != nil {
			return nil, err
		}
		return c.do(ctx, method, "/v1/admin/dlq/"+url.PathEscape(group)+path, nil)
	}
	printJSON := func(b []byte) error {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return err
		}
		fmt.Fprintln(stdout, out.String())
		return nil
	}
	list := &cobra.Command{
		Use: "list", Short: "List the group's dead letters, oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if after != "" {
				q.Set("cursor", after)
			}
			body, err := call(cmd.Context(), http.MethodGet, "?"+q.Encode())
			if err != nil {
				return err
			}
			var page struct {
				Items []struct {
					Event struct {
						ID, Type, Key string
					}
					Error    string
					Attempts int
					FailedAt string `json:"failed_at"`
				}
				NextCursor *string `json:"next_cursor"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%-28s %-20s %-8s %-24s %s\n", "EVENT", "TYPE", "ATTEMPTS", "FAILED AT", "ERROR")
			for _, d := range page.Items {
				fmt.Fprintf(stdout, "%-28s %-20s %-8d %-24s %s\n", d.Event.ID, d.Event.Type, d.Attempts, d.FailedAt, d.Error)
			}
			if page.NextCursor != nil {
				fmt.Fprintf(stdout, "more: --after %s\n", *page.NextCursor)
			}
			return nil
		},
	}
	list.Flags().StringVar(&after, "after", "", "list after this event id")
	list.Flags().IntVar(&limit, "limit", 20, "how many (1..100)")
	show := &cobra.Command{
		Use: "show EVENT_ID", Short: "Show one dead letter with its event and error", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := call(cmd.Context(), http.MethodGet, "/"+url.PathEscape(args[0]))
			if err != nil {
				return err
			}
			return printJSON(body)
		},
	}
	replay := &cobra.Command{
		Use: "replay EVENT_ID", Short: "Deliver a dead-lettered event to its group again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := call(cmd.Context(), http.MethodPost, "/"+url.PathEscape(args[0])+"/replay"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "replayed %s to group %s\n", args[0], group)
			return nil
		},
	}
	drop := &cobra.Command{
		Use: "drop EVENT_ID", Short: "Remove a dead letter without delivering it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := call(cmd.Context(), http.MethodDelete, "/"+url.PathEscape(args[0])); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "dropped %s from group %s\n", args[0], group)
			return nil
		},
	}
	cmd.AddCommand(list, show, replay, drop)
	return cmd
}
