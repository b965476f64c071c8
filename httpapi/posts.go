package httpapi

import (
	"context"
	"net/http"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

func (s *server) createPost(w http.ResponseWriter, r *http.Request) {
	serveCreate(s, w, r, s.App.CreatePost)
}

func (s *server) getPost(w http.ResponseWriter, r *http.Request) {
	p, err := s.App.Post(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, p)
}

func (s *server) editPost(w http.ResponseWriter, r *http.Request) {
	var e app.PostEdit
	if err := decode(r, &e); err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.App.EditPost(r.Context(), r.PathValue("id"), e)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, p)
}

func (s *server) deletePost(w http.ResponseWriter, r *http.Request) {
	if err := s.App.DeletePost(r.Context(), r.PathValue("id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) authorPosts(w http.ResponseWriter, r *http.Request) {
	s.listPosts(w, r, r.PathValue("id"), s.App.PostsByAuthor)
}

func (s *server) tagPosts(w http.ResponseWriter, r *http.Request) {
	s.listPosts(w, r, r.PathValue("tag"), s.App.PostsByTag)
}

func (s *server) feed(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, "", func(ctx context.Context, _, cursor string, limit int) (app.Page[rookery.Post], error) {
		return s.App.Feed(ctx, cursor, limit)
	})
}

func (s *server) listPosts(w http.ResponseWriter, r *http.Request, of string, list func(ctx context.Context, of, cursor string, limit int) (app.Page[rookery.Post], error)) {
	servePage(s, w, r, of, list)
}

func (s *server) likePost(w http.ResponseWriter, r *http.Request) {
	if err := s.App.LikePost(r.Context(), r.PathValue("id"), r.PathValue("user")); err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]bool{"liked": true})
}

func (s *server) unlikePost(w http.ResponseWriter, r *http.Request) {
	if err := s.App.UnlikePost(r.Context(), r.PathValue("id"), r.PathValue("user")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) listLikes(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, r.PathValue("id"), s.App.Likes)
}

func (s *server) addComment(w http.ResponseWriter, r *http.Request) {
	serveCreate(s, w, r, func(ctx context.Context, in app.CommentInput) (app.Comment, bool, error) {
		return s.App.AddComment(ctx, r.PathValue("id"), in)
	})
}

func (s *server) listComments(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, r.PathValue("id"), s.App.Comments)
}

func (s *server) deleteComment(w http.ResponseWriter, r *http.Request) {
	if err := s.App.DeleteComment(r.Context(), r.PathValue("id"), r.PathValue("comment")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
