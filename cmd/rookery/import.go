package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
	"github.com/rookery/rookery/internal/progress"
)

// importCmd loads data into a running server through its public API.
func importCmd(cfg *config, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Load data into a running server through its API"}
	var (
		server, prefix string
		symmetric      bool
		concurrency    int
	)
	g := &cobra.Command{
		Use:   "graph FILE",
		Short: "Create a follow graph's users and follows",
		Long: "Create the users and follows of a graph through the server's API, with bounded concurrency\n" +
			"and a progress line. FILE is a SNAP edge list (`#` comments, tab or space separated, .gz\n" +
			"accepted, sparse ids remapped; `a b` means a follows b) or DeathStarBench's X.edges with\n" +
			"X.nodes beside it (undirected pairs: add --symmetric to follow both ways, as DeathStarBench\n" +
			"does). Node i becomes user <prefix><i> with username <prefix>_<i>. Importing again is\n" +
			"harmless: every write is idempotent.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if concurrency < 1 {
				return errors.New("--concurrency must be at least 1")
			}
			gr, err := graph.Read(args[0], symmetric)
			if err != nil {
				return err
			}
			c, err := newAPIClient(cfg, server, concurrency)
			if err != nil {
				return err
			}
			return importGraph(cmd.Context(), c, gr, prefix, concurrency, stderr)
		},
	}
	f := g.Flags()
	f.StringVar(&server, "server", "http://127.0.0.1:8080", "the running server's base URL")
	f.StringVar(&prefix, "prefix", "g", "prefix of the imported users' ids and usernames (letters and digits)")
	f.BoolVar(&symmetric, "symmetric", false, "follow both ways along every edge")
	f.IntVar(&concurrency, "concurrency", 32, "requests in flight at once")
	cfg.addClientFlags(f)
	cmd.AddCommand(g)
	return cmd
}

// importGraph creates the users, then the follows, of g; it reports progress on out about twice a
// second.
func importGraph(ctx context.Context, c *apiClient, g graph.Graph, prefix string, concurrency int, out io.Writer) error {
	id := func(n int32) string { return bench.UserID(prefix, int(n)) }
	start := time.Now()
	users := func(i int) (string, string, []byte) {
		return http.MethodPut, "/v1/users/" + id(int32(i)), []byte(`{"username":"` + bench.Username(prefix, i) + `"}`)
	}
	if err := inParallel(ctx, "users", g.Nodes, concurrency, out, func(ctx context.Context, i int) error {
		m, p, b := users(i)
		return retried(ctx, func() error { _, err := c.do(ctx, m, p, b); return err })
	}); err != nil {
		return err
	}
	if err := inParallel(ctx, "follows", len(g.Edges), concurrency, out, func(ctx context.Context, i int) error {
		e := g.Edges[i]
		return retried(ctx, func() error {
			_, err := c.do(ctx, http.MethodPut, "/v1/users/"+id(e[0])+"/following/"+id(e[1]), nil)
			return err
		})
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "imported %d users and %d follows in %v\n", g.Nodes, len(g.Edges), time.Since(start).Round(time.Millisecond))
	return nil
}

// retried runs do, again after a pause when the server answers 429 or 5xx (up to 5 tries).
func retried(ctx context.Context, do func() error) error {
	var err error
	for attempt := range 5 {
		err = do()
		var se *statusError
		if err == nil || errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
	return err
}

// inParallel runs do for 0..n-1 on workers goroutines, stopping at the first error, and shows its
// progress on out (a bar on a terminal, a line every few seconds elsewhere).
func inParallel(ctx context.Context, what string, n, workers int, out io.Writer, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(ctx, i); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	bar := progress.New(out, what, int64(n), what)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			bar.Set(done.Load())
		case <-finished:
			bar.Set(done.Load())
			bar.Finish()
			return context.Cause(ctx)
		}
	}
}
