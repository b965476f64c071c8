package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
	"github.com/rookery/rookery/metrics"
)

// benchFrontCmd serves a baseline behind a thin HTTP front with Rookery's auth and reply shape, so
// that the harness measures it as it measures Rookery (--target rookery --server the front): the
// HTTP, the token checks and the JSON of hydrated posts are then in both figures.
func benchFrontCmd(cfg *config, stderr io.Writer) *cobra.Command {
	var target, addr, prefix string
	var base baselines
	var symmetric bool
	var fixedBytes int
	cmd := &cobra.Command{
		Use:   "front --target postgres|redis-list|fixed --graph FILE",
		Short: "Serve a baseline behind an HTTP front with Rookery's auth and reply shape, for the harness to load",
		Long: "Loads --graph into the baseline, then serves the routes the harness calls (feed, user posts,\n" +
			"post, follow, unfollow, like, delete) at --addr: bearer tokens checked as Rookery checks them\n" +
			"(--auth-secret, or the secret in --data-dir), X-On-Behalf-Of for server tokens, feeds as\n" +
			"hydrated posts (author, counts, liked_by_me). --target fixed answers every request with the\n" +
			"same --fixed-bytes body after the token check: the floor of HTTP on this machine.\n" +
			"/metrics has the process's CPU and memory, as the harness's server line reads them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret, err := cfg.secret(false)
			if err != nil {
				return err
			}
			if secret == nil {
				return errors.New("no secret to check tokens with: set --auth-secret (ROOKERY_AUTH_SECRET) or --data-dir")
			}
			v, err := auth.NewVerifier(secret, nil, rookery.SystemClock)
			if err != nil {
				return err
			}
			f := &front{verifier: v, prefix: prefix, fixed: []byte(strings.Repeat("x", fixedBytes))}
			ctx := cmd.Context()
			if target != "fixed" {
				path := cmd.Flags().Lookup("graph").Value.String()
				if path == "" {
					return errors.New("--graph is required (the baseline is loaded with it)")
				}
				g, err := graph.Read(path, symmetric)
				if err != nil {
					return err
				}
				bt, drop, ok, err := base.open(ctx, target, g, true, stderr)
				if !ok {
					return fmt.Errorf("--target must be postgres, redis-list or fixed, not %q", target)
				}
				if err != nil {
					return err
				}
				defer drop()
				f.inner = bt
			}
			m := metrics.New()
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", m.Handler())
			mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ready"}`)) })
			mux.Handle("/v1/", f)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(slog.NewTextHandler(stderr, nil), slog.LevelWarn)}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
			}()
			fmt.Fprintf(stderr, "bench front: the %s baseline at http://%s\n", target, ln.Addr())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.String("graph", "", "the follow graph the baseline is loaded with (SNAP edge list or DeathStarBench .edges)")
	fl.BoolVar(&symmetric, "symmetric", false, "the graph's edges go both ways (DeathStarBench)")
	fl.StringVar(&target, "target", "postgres", "the baseline behind the front: postgres, redis-list, or fixed (a fixed reply: the floor)")
	fl.StringVar(&addr, "addr", "127.0.0.1:18090", "where the front listens")
	base.addFlags(fl, "rookery_front", "the baseline's schema (PostgreSQL) or key prefix (Redis); loaded on start, dropped on exit")
	fl.StringVar(&prefix, "prefix", "g", "the user ids' prefix: user g<N> is the graph's node N")
	fl.IntVar(&fixedBytes, "fixed-bytes", 3000, "with --target fixed: the reply's size (about a page of 10 hydrated posts)")
	cfg.addClientFlags(fl)
	return cmd
}

// front is the HTTP front of a baseline (or, with no inner target, the fixed reply).
type front struct {
	verifier *auth.Verifier
	prefix   string
	inner    bench.Target // nil: answer fixed
	fixed    []byte
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, status := f.caller(r)
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if f.inner == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(f.fixed)
		return
	}
	req, ok := f.request(r, user)
	if !ok {
		http.Error(w, "no such route in the front", http.StatusNotFound)
		return
	}
	rep := f.inner.Do(r.Context(), req)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case rep.Status >= 300:
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"status":%d}`, rep.Status)
	case req.Op == bench.OpFeed || req.Op == bench.OpUser:
		page := struct {
			Items      []rookery.Post `json:"items"`
			NextCursor string         `json:"next_cursor"`
		}{Items: make([]rookery.Post, len(rep.Rows))}
		for i, row := range rep.Rows {
			id := bench.UserID(f.prefix, row.Author)
			page.Items[i] = rookery.Post{ID: row.ID, Author: rookery.Author{ID: id, Username: row.Username},
				Text: row.Text, Tags: []string{}, Mentions: []string{}, Media: []rookery.Media{}, Visibility: "public",
				CreatedAt: rookery.Time{Time: row.CreatedAt}, LikeCount: row.Likes, LikedByMe: row.LikedByMe}
		}
		json.NewEncoder(w).Encode(page)
	case req.Op == bench.OpPost:
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"id": rep.PostID})
	default:
		w.WriteHeader(rep.Status)
	}
}

// caller checks the bearer token as Rookery does and returns the graph node it acts for.
func (f *front) caller(r *http.Request) (int, int) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, http.StatusUnauthorized
	}
	c, err := f.verifier.Verify(strings.TrimSpace(token))
	if err != nil {
		return 0, http.StatusUnauthorized
	}
	id := c.UserID
	if obo := r.Header.Get("X-On-Behalf-Of"); obo != "" {
		if !c.Server {
			return 0, http.StatusForbidden
		}
		id = obo
	}
	n, ok := f.node(id)
	if !ok {
		return 0, http.StatusForbidden
	}
	return n, 0
}

// node returns the graph node of user id prefix<N>.
func (f *front) node(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, f.prefix)
	n, err := strconv.Atoi(rest)
	return n, ok && err == nil && n >= 0
}

// request maps the routes bench.HTTPTarget calls back to the request it made.
func (f *front) request(r *http.Request, user int) (bench.Request, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1/...
	req := bench.Request{User: user}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	req.Limit = limit
	switch {
	case r.Method == http.MethodGet && len(parts) == 2 && parts[1] == "feed":
		req.Op = bench.OpFeed
	case r.Method == http.MethodGet && len(parts) == 4 && parts[1] == "users" && parts[3] == "posts":
		req.Op = bench.OpUser
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "posts":
		var body struct{ Text string }
		if json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body) != nil {
			return req, false
		}
		req.Op, req.Text = bench.OpPost, body.Text
	case len(parts) == 5 && parts[1] == "users" && parts[3] == "following" && (r.Method == http.MethodPut || r.Method == http.MethodDelete):
		other, ok := f.node(parts[4])
		if !ok {
			return req, false
		}
		req.Op, req.Other = bench.OpFollow, other
		if r.Method == http.MethodDelete {
			req.Op = bench.OpUnfollow
		}
	case r.Method == http.MethodPut && len(parts) == 5 && parts[1] == "posts" && parts[3] == "likes":
		req.Op, req.PostID = bench.OpLike, parts[2]
	case r.Method == http.MethodDelete && len(parts) == 3 && parts[1] == "posts":
		req.Op, req.PostID = bench.OpDelete, parts[2]
	default:
		return req, false
	}
	return req, true
}
