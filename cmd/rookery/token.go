package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/auth"
)

func tokenCmd(cfg *config, stdout io.Writer) *cobra.Command {
	var (
		sub    string
		server bool
		ttl    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --sub ID [--server] [--ttl 1h]",
		Short: "Print a bearer token signed with the configured secret",
		Long: "Print an HS256 bearer token for user ID, signed with the same secret `serve` uses: " +
			"--auth-secret (ROOKERY_AUTH_SECRET) or, with the embedded store, the one `serve` generated in its --data-dir. " +
			"It never makes a secret of its own.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sub == "" {
				return errors.New("--sub is required")
			}
			if ttl <= 0 {
				return errors.New("--ttl must be positive")
			}
			secret, err := cfg.secret(false)
			if err != nil {
				return err
			}
			if secret == nil {
				return errors.New("no secret configured: set --auth-secret (ROOKERY_AUTH_SECRET)")
			}
			tok, err := auth.Mint(secret, sub, server, ttl, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, tok)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sub, "sub", "", "the user id the token authenticates (the app's name, with --server)")
	f.BoolVar(&server, "server", false, "a server-scope token, which may act for any user")
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	cfg.addClientFlags(f)
	return cmd
}
