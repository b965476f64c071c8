// Command rookery is the Rookery feed backend: `rookery serve` runs the API and its workers, and the
// other subcommands operate it (see `rookery --help`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rookery:", err)
		os.Exit(1)
	}
}
