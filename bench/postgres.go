package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rookery/rookery/graph"
)

// PostgresTarget is the first baseline: fan-out on read in PostgreSQL, what many teams
// build first. Posts and follows live in tables with the obvious indexes; the home feed is one query
// joining the reader's follows to posts, newest first (as Bluesky's open-source AppView builds its
// timeline). Everything lives in its own schema.
type PostgresTarget struct {
	pool   *pgxpool.Pool
	schema string
	// Hydrated reads each post whole, with whether the reader liked it, into Reply.Rows: what a
	// front with Rookery's reply shape needs (rookery bench front). Unset: the raw floor.
	Hydrated bool
}

// NewPostgresTarget connects to url (a pool of conns connections) and creates schema's tables if
// they do not exist.
func NewPostgresTarget(ctx context.Context, url, schema string, conns int) (*PostgresTarget, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	_, err = pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE IF NOT EXISTS users (id bigint PRIMARY KEY, username text NOT NULL UNIQUE);
		CREATE TABLE IF NOT EXISTS follows (follower bigint NOT NULL, followee bigint NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (follower, followee));
		CREATE INDEX IF NOT EXISTS follows_followee ON follows (followee);
		CREATE TABLE IF NOT EXISTS posts (id bigserial PRIMARY KEY, author bigint NOT NULL, text text NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(), like_count int NOT NULL DEFAULT 0);
		CREATE INDEX IF NOT EXISTS posts_author ON posts (author, created_at DESC, id DESC);
		CREATE TABLE IF NOT EXISTS likes (post bigint NOT NULL, "user" bigint NOT NULL, PRIMARY KEY (post, "user"));`)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres baseline schema: %w", err)
	}
	return &PostgresTarget{pool: pool, schema: schema}, nil
}

// Load copies g's users and follows in (COPY), replacing what the schema held.
func (p *PostgresTarget) Load(ctx context.Context, g graph.Graph, progress io.Writer) error {
	if _, err := p.pool.Exec(ctx, `TRUNCATE users, follows, posts, likes`); err != nil {
		return err
	}
	users := make([][]any, g.Nodes)
	for i := range users {
		users[i] = []any{int64(i), "u" + strconv.Itoa(i)}
	}
	if _, err := p.pool.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "username"}, pgx.CopyFromRows(users)); err != nil {
		return err
	}
	follows := make([][]any, len(g.Edges))
	for i, e := range g.Edges {
		follows[i] = []any{int64(e[0]), int64(e[1])}
	}
	if _, err := p.pool.CopyFrom(ctx, pgx.Identifier{"follows"}, []string{"follower", "followee"}, pgx.CopyFromRows(follows)); err != nil {
		return err
	}
	// Statistics for the planner, and a checkpoint so that flushing the load does not stall the run.
	for _, stmt := range []string{`VACUUM ANALYZE users`, `VACUUM ANALYZE follows`, `CHECKPOINT`} {
		if _, err := p.pool.Exec(ctx, stmt); err != nil { // one by one: VACUUM runs outside a transaction
			return err
		}
	}
	fmt.Fprintf(progress, "postgres baseline: loaded %d users and %d follows into schema %s\n", g.Nodes, len(g.Edges), p.schema)
	return nil
}

// Drop removes the schema and closes the pool.
func (p *PostgresTarget) Drop(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{p.schema}.Sanitize()+` CASCADE`)
	p.pool.Close()
	return err
}

// feedSQL is the home feed by fan-out on read: the newest posts of the reader's followees and the
// reader, with their authors.
const feedSQL = `SELECT p.id, p.author, u.username, p.text, p.created_at, p.like_count
	FROM posts p JOIN users u ON u.id = p.author
	WHERE p.author IN (SELECT followee FROM follows WHERE follower = $1) OR p.author = $1
	ORDER BY p.created_at DESC, p.id DESC LIMIT $2`

const userSQL = `SELECT p.id, p.author, u.username, p.text, p.created_at, p.like_count
	FROM posts p JOIN users u ON u.id = p.author WHERE p.author = $1
	ORDER BY p.created_at DESC, p.id DESC LIMIT $2`

// likedSQL adds whether the reader ($1) liked each post, for the hydrated reads.
const likedSQL = `SELECT f.*, EXISTS (SELECT 1 FROM likes l WHERE l.post = f.id AND l."user" = $1) FROM (%s) f`

// Do implements Target; statuses mirror the HTTP API's.
func (p *PostgresTarget) Do(ctx context.Context, r Request) Reply {
	u := int64(r.User)
	switch r.Op {
	case OpFeed, OpUser:
		q := feedSQL
		if r.Op == OpUser {
			q = userSQL
		}
		if p.Hydrated {
			q = fmt.Sprintf(likedSQL, q)
		}
		rows, err := p.pool.Query(ctx, q, u, r.pageSize(DSBPageSize))
		if err != nil {
			return Reply{Status: 500}
		}
		defer rows.Close()
		rep := Reply{Status: 200}
		for rows.Next() {
			var id, author int64
			var username, text string
			var at time.Time
			var likes int
			var liked bool
			dest := []any{&id, &author, &username, &text, &at, &likes}
			if p.Hydrated {
				dest = append(dest, &liked)
			}
			if err := rows.Scan(dest...); err != nil {
				return Reply{Status: 500}
			}
			rep.Feed = append(rep.Feed, strconv.FormatInt(id, 10))
			if p.Hydrated {
				rep.Rows = append(rep.Rows, PostRow{ID: rep.Feed[len(rep.Feed)-1], Author: int(author), Username: username, Text: text, CreatedAt: at, Likes: int64(likes), LikedByMe: liked})
			}
		}
		if rows.Err() != nil {
			return Reply{Status: 500}
		}
		return rep
	case OpPost:
		var id int64
		if err := p.pool.QueryRow(ctx, `INSERT INTO posts (author, text) VALUES ($1, $2) RETURNING id`, u, r.Text).Scan(&id); err != nil {
			return Reply{Status: 500}
		}
		return Reply{Status: 201, PostID: strconv.FormatInt(id, 10)}
	case OpFollow:
		return p.exec(ctx, 200, `INSERT INTO follows (follower, followee) VALUES ($1, $2) ON CONFLICT DO NOTHING`, u, int64(r.Other))
	case OpUnfollow:
		return p.exec(ctx, 204, `DELETE FROM follows WHERE follower = $1 AND followee = $2`, u, int64(r.Other))
	case OpLike, OpDelete:
		post, err := strconv.ParseInt(r.PostID, 10, 64)
		if err != nil {
			return Reply{Status: 404}
		}
		if r.Op == OpDelete {
			return p.exec(ctx, 204, `DELETE FROM posts WHERE id = $1 AND author = $2`, post, u)
		}
		return p.exec(ctx, 200, `WITH l AS (INSERT INTO likes (post, "user") VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING post)
			UPDATE posts SET like_count = like_count + 1 WHERE id IN (SELECT post FROM l)`, post, u)
	}
	return Reply{Status: 400}
}

func (p *PostgresTarget) exec(ctx context.Context, ok int, sql string, args ...any) Reply {
	if _, err := p.pool.Exec(ctx, sql, args...); err != nil {
		return Reply{Status: 500}
	}
	return Reply{Status: ok}
}
