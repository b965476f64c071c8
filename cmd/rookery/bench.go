package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
)

// benchCmd runs the load harness against a running server (docs/performance.md).
func benchCmd(cfg *config, stdout, stderr io.Writer) *cobra.Command {
	var (
		server, prefix, mix, users, out   string
		target                            string
		base                              baselines
		symmetric, load, sweep            bool
		rate, lagSample                   float64
		duration, bound, warmup, drainFor time.Duration
		steps, conns, feedLimit           int
		minSamples                        int
		sweepFactor                       float64
		refine, retries                   int
		seed                              uint64
		streams                           int
		webhooks                          bool
		webhookSlow                       time.Duration
		webhookTwin                       bool
		catchUpWait                       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench --graph FILE",
		Short: "Run an open-loop workload against a running server and report latency percentiles",
		Long: "Run a workload mix over the users of a follow graph (imported with `rookery import graph`,\n" +
			"or with --import) at a target rate with exponential inter-arrival times, against Rookery or a\n" +
			"baseline (--target postgres or redis-list, loaded with the graph). Latency is measured\n" +
			"from each request's intended send time, into HDR histograms per operation; fan-out lag is\n" +
			"probed on a sample of posts. Prints a table; --out writes everything as JSON. --sweep raises\n" +
			"the rate by --sweep-factor each step until a p99 passes --p99-bound or errors pass 1% in every\n" +
			"one of 1+--sweep-retries tries of that rate (the knee is the highest rate that passed).\n" +
			"Mixes: dsb (60% feed, 30% user posts, 10% post), follow, like, delete, write-heavy, feed, post.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, ok := bench.Mixes[mix]
			if !ok {
				return fmt.Errorf("--mix must be dsb, follow, like, delete, write-heavy, feed or post, not %q", mix)
			}
			if cmd.Flags().Lookup("graph").Value.String() == "" {
				return errors.New("--graph is required")
			}
			g, err := graph.Read(cmd.Flags().Lookup("graph").Value.String(), symmetric)
			if err != nil {
				return err
			}
			var t bench.Target
			var meter bench.Meter
			switch target {
			case "rookery":
				c, err := newAPIClient(cfg, server, conns)
				if err != nil {
					return err
				}
				if load {
					if err := importGraph(cmd.Context(), c, g, prefix, 32, stderr); err != nil {
						return err
					}
					// The import leaves the consumers a backlog (a follow is several events'
					// work); measured on top of it, the mix would measure the backlog.
					if err := c.waitDrained(cmd.Context(), drainFor, stderr); err != nil {
						return err
					}
				}
				ht := bench.NewHTTPTarget(server, c.token, prefix, conns)
				ht.FeedLimit = feedLimit
				t = ht
				if catchUpWait > 0 {
					meter = &serverMeter{c: c, wait: catchUpWait, out: stderr}
				}
			default:
				// Reloaded with the graph on every run.
				bt, drop, ok, err := base.open(cmd.Context(), target, g, false, stderr)
				if !ok {
					return fmt.Errorf("--target must be rookery, postgres or redis-list, not %q", target)
				}
				if err != nil {
					return err
				}
				defer drop()
				t = bt
			}
			bc := bench.Config{Graph: g, Mix: m, Rate: rate, Duration: duration, Users: users, Prefix: prefix, Seed: seed, LagSample: lagSample, Progress: stderr, Meter: meter}
			var live *liveLoad
			if streams > 0 || webhooks {
				if target != "rookery" {
					return errors.New("--streams and --webhooks load a Rookery server (--target rookery)")
				}
				c, err := newAPIClient(cfg, server, conns)
				if err != nil {
					return err
				}
				if webhookTwin && webhookSlow > 0 {
					return errors.New("--webhook-twin and --webhook-slow each register the second endpoint: give one")
				}
				second := webhookSlow
				if webhookTwin {
					second = 0
				} else if webhookSlow == 0 {
					second = -1
				}
				if live, err = startLive(cmd.Context(), c, g, prefix, seed, streams, webhooks, second, stderr); err != nil {
					return err
				}
				defer live.close()
				bc.OnPost = live.posted
			}
			var results []bench.Result
			if warmup > 0 {
				fmt.Fprintf(stderr, "bench: warming up for %v (not measured)\n", warmup)
				wc := bc
				wc.Duration = warmup
				if _, err := bench.Run(cmd.Context(), t, wc); err != nil {
					return err
				}
			}
			if sweep {
				if sweepFactor <= 1 {
					return errors.New("--sweep-factor must be more than 1")
				}
				bc.MinSamples = minSamples
				results, err = bench.Sweep(cmd.Context(), t, bc, bound, steps, sweepFactor, refine, retries)
			} else {
				var r bench.Result
				live.reset()
				r, err = bench.Run(cmd.Context(), t, bc)
				live.collect(cmd.Context(), &r, stderr)
				results = append(results, r)
			}
			for i, r := range results {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				bench.Table(stdout, r)
			}
			if sweep {
				rate, ok, reached := bench.Knee(results, bound)
				switch {
				case ok && !reached:
					fmt.Fprintf(stdout, "\nknee: not reached (every step passed, up to %.0f/s: raise --steps or --rate)\n", rate)
				case ok:
					fmt.Fprintf(stdout, "\nknee: %.0f/s (the highest rate with every p99 <= %v and errors <= 1%%)\n", rate, bound)
				default:
					fmt.Fprintf(stdout, "\nknee: none (the first rate already failed the bound)\n")
				}
			}
			if out != "" {
				f, ferr := os.Create(out)
				if ferr != nil {
					return ferr
				}
				defer f.Close()
				if jerr := bench.JSON(f, bench.RunFile{Mix: mix, Users: users, GraphNodes: g.Nodes, GraphEdges: len(g.Edges), Results: results}); jerr != nil {
					return jerr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.String("graph", "", "the follow graph (SNAP edge list or DeathStarBench .edges)")
	f.BoolVar(&symmetric, "symmetric", false, "the graph's edges go both ways (DeathStarBench)")
	f.BoolVar(&load, "import", false, "import the graph first (as the import graph command does), then wait for the server's consumers to catch up")
	f.DurationVar(&drainFor, "drain-timeout", 15*time.Minute, "with --import, the longest wait for the consumers to catch up")
	f.StringVar(&target, "target", "rookery", "what to load: rookery (the server at --server), or a baseline: postgres (fan-out on read) or redis-list (a capped Redis list per user, filled by fan-out on write: what a team builds by hand)")
	f.StringVar(&server, "server", "http://127.0.0.1:8080", "the running server's base URL")
	base.addFlags(f, "rookery_baseline", "the baselines' schema (PostgreSQL) or key prefix (Redis); reloaded with the graph on every run")
	f.StringVar(&prefix, "prefix", "g", "the imported users' prefix")
	f.StringVar(&mix, "mix", "dsb", "workload mix: dsb, follow, like, delete, write-heavy, feed (reads only) or post (posts only)")
	f.StringVar(&users, "users", "uniform", "who acts: uniform, zipf, or followers (in proportion to followers)")
	f.Float64Var(&rate, "rate", 200, "target requests per second (the first rate of a sweep)")
	f.DurationVar(&duration, "duration", 30*time.Second, "how long to send (each step of a sweep)")
	f.DurationVar(&warmup, "warmup", 0, "run the mix this long first, unmeasured (timelines built, caches warm)")
	f.Float64Var(&lagSample, "lag-sample", 0.05, "share of posts whose fan-out lag is probed; a probe reads 3 followers' feeds every 5-50 ms until the post shows (followers whose feed the run read before: a first read rebuilds a timeline, which measures that read, not fan-out; a probe with none is reported as cold), so at high post rates keep it small (0.005 at 1,000 posts/s)")
	f.BoolVar(&sweep, "sweep", false, "raise the rate until a p99 passes --p99-bound or errors pass 1%")
	f.DurationVar(&bound, "p99-bound", 50*time.Millisecond, "the p99 bound of a sweep")
	f.IntVar(&steps, "steps", 8, "the most steps of a sweep")
	f.Float64Var(&sweepFactor, "sweep-factor", 1.2, "a sweep's rate grows by this factor each step (the knee is known to within it, before --refine)")
	f.IntVar(&refine, "refine", 2, "after a sweep's first step that fails, this many more steps, each halfway (geometrically) between the highest rate that passed and the lowest that failed (2 with --sweep-factor 1.2: the knee is known to within 1.047x)")
	f.IntVar(&retries, "sweep-retries", 1, "a sweep's step that fails is run again at its rate up to this many times, and fails only if every try does (a system past its knee fails each; one pause of a shared host spoils one try's p99); a rate passes if one try did")
	f.IntVar(&minSamples, "min-samples", 500, "a step of a sweep sends longer than --duration where the mix's rarest operation would get fewer requests than this (a p99 of a few hundred is one stall's; 0: never longer)")
	f.IntVar(&conns, "connections", 256, "HTTP connections to the server")
	f.IntVar(&feedLimit, "feed-limit", bench.DSBPageSize, "page size of feed and user-posts reads (DeathStarBench: 10)")
	f.Uint64Var(&seed, "seed", 1, "random seed (users, operations, texts)")
	f.StringVar(&out, "out", "", "write the results as JSON to this file")
	f.IntVar(&streams, "streams", 0, "hold this many users' streams (GET /v1/stream) open during the run, and measure each feed.post event's lag from its post's 201 (stream_lag); also reports the server's memory per idle stream")
	f.BoolVar(&webhooks, "webhooks", false, "run a webhook receiver, register it for every event type, and measure deliveries per second and their lag from the event (webhook_lag); the server needs --webhooks-allow-http --webhooks-allow-private")
	f.DurationVar(&webhookSlow, "webhook-slow", 0, "with --webhooks, register a second endpoint that answers after this long (its lag is webhook_second_lag)")
	f.DurationVar(&catchUpWait, "catch-up-wait", time.Minute, "with --target rookery: after each run, the longest wait for the server's consumers to catch up; the server's CPU (per request) is counted until they did, and its peak memory over the run (0 measures nothing)")
	f.BoolVar(&webhookTwin, "webhook-twin", false, "with --webhooks, register a second endpoint that answers at once (its lag is webhook_second_lag): the baseline of a --webhook-slow run, with as many endpoints")
	cfg.addClientFlags(f)
	cmd.AddCommand(benchFrontCmd(cfg, stderr))
	var headlineBound time.Duration
	headline := &cobra.Command{
		Use:   "headline DIR",
		Short: "The table of issue 25's targets from the run files of scripts/bench-headline.sh in DIR: medians, ranges, ratios",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return bench.Headline(stdout, args[0], headlineBound)
		},
	}
	headline.Flags().DurationVar(&headlineBound, "p99-bound", 50*time.Millisecond, "the p99 bound the capacity sweeps were run with")
	cmd.AddCommand(headline)
	var diskDir, diskOut string
	var diskFor time.Duration
	disk := &cobra.Command{
		Use:   "disk",
		Short: "How long this disk takes to sync a small write, again and again (what a synced commit waits for): p50, p99, the slowest, and how many stalled",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := bench.ProbeDisk(c.Context(), diskDir, diskFor, stderr)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "disk (%s): %s\n", diskDir, r)
			if diskOut == "" {
				return nil
			}
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			return os.WriteFile(diskOut, b, 0o644)
		},
	}
	disk.Flags().StringVar(&diskOut, "out", "", "also write the figures as JSON to this file (scripts/bench-headline.sh: "+bench.DiskFile+" beside the runs)")
	disk.Flags().StringVar(&diskDir, "dir", ".", "a directory on the disk to probe (the server's --data-dir)")
	disk.Flags().DurationVar(&diskFor, "duration", 20*time.Second, "how long to probe")
	cmd.AddCommand(disk)
	cmd.AddCommand(&cobra.Command{
		Use:   "report BASELINE.json RUN.json...",
		Short: "Compare runs written by --out: p50 and p99 per operation, as ratios to the first file",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var runs []bench.RunFile
			for _, a := range args {
				b, err := os.ReadFile(a)
				if err != nil {
					return err
				}
				var r bench.RunFile
				if err := json.Unmarshal(b, &r); err != nil {
					return fmt.Errorf("%s: %w", a, err)
				}
				runs = append(runs, r)
			}
			names := make([]string, len(args))
			for i, a := range args {
				names[i] = strings.TrimSuffix(filepath.Base(a), ".json")
			}
			bench.Compare(stdout, names, runs)
			return nil
		},
	})
	return cmd
}
