package httpapi

import (
	"context"
	"net/http"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

func (s *server) follow(w http.ResponseWriter, r *http.Request) {
	at, err := s.App.Follow(r.Context(), r.PathValue("id"), r.PathValue("target"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]any{"following": true, "followed_at": at})
}

func (s *server) unfollow(w http.ResponseWriter, r *http.Request) {
	if err := s.App.Unfollow(r.Context(), r.PathValue("id"), r.PathValue("target")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) followStatus(w http.ResponseWriter, r *http.Request) {
	at, err := s.App.FollowedAt(r.Context(), r.PathValue("id"), r.PathValue("target"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]any{"followed_at": at})
}

func (s *server) listFollowing(w http.ResponseWriter, r *http.Request) {
	s.listFollows(w, r, s.App.Following)
}

func (s *server) listFollowers(w http.ResponseWriter, r *http.Request) {
	s.listFollows(w, r, s.App.Followers)
}

func (s *server) listFollows(w http.ResponseWriter, r *http.Request, list func(ctx context.Context, id, cursor string, limit int) (app.Page[app.Follow], error)) {
	servePage(s, w, r, r.PathValue("id"), list)
}

// servePage answers a list request: it reads the paging parameters, calls list for of, and
// encodes the page.
func servePage[T any](s *server, w http.ResponseWriter, r *http.Request, of string, list func(ctx context.Context, of, cursor string, limit int) (app.Page[T], error)) {
	limit, cursor, err := listParams(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := list(r.Context(), of, cursor, limit)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	rp := reply(p)
	if a, ok := rp.(jsonAppender); ok && p.Memo != nil { // served again unchanged: encoded once
		write(w, http.StatusOK, p.Memo.Rendered(func() []byte { return appendReply(nil, a) }))
		return
	}
	encode(w, http.StatusOK, rp)
}

func (s *server) block(w http.ResponseWriter, r *http.Request) {
	s.relation(w, r, s.App.Block)
}

func (s *server) unblock(w http.ResponseWriter, r *http.Request) {
	s.relation(w, r, s.App.Unblock)
}

func (s *server) mute(w http.ResponseWriter, r *http.Request) {
	s.relation(w, r, s.App.Mute)
}

func (s *server) unmute(w http.ResponseWriter, r *http.Request) {
	s.relation(w, r, s.App.Unmute)
}

func (s *server) listBlocks(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, r.PathValue("id"), s.App.Blocks)
}

func (s *server) listMutes(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, r.PathValue("id"), s.App.Mutes)
}

func (s *server) blockStatus(w http.ResponseWriter, r *http.Request) {
	s.relationStatus(w, r, "blocked_at", s.App.BlockedAt)
}

func (s *server) muteStatus(w http.ResponseWriter, r *http.Request) {
	s.relationStatus(w, r, "muted_at", s.App.MutedAt)
}

// relationStatus answers GET of a block or a mute: 200 with its time, named name, or 404.
func (s *server) relationStatus(w http.ResponseWriter, r *http.Request, name string, at func(ctx context.Context, id, target string) (rookery.Time, error)) {
	t, err := at(r.Context(), r.PathValue("id"), r.PathValue("target"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]any{name: t})
}

// relation answers the block and mute routes: 204 on success.
func (s *server) relation(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, id, target string) error) {
	if err := change(r.Context(), r.PathValue("id"), r.PathValue("target")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
