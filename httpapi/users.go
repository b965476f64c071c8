package httpapi

import (
	"context"
	"net/http"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

func (s *server) putUser(w http.ResponseWriter, r *http.Request) {
	serveCreate(s, w, r, func(ctx context.Context, in app.UserInput) (rookery.User, bool, error) {
		return s.App.PutUser(ctx, r.PathValue("id"), in)
	})
}

func (s *server) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := s.App.User(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, u)
}

func (s *server) deleteUser(w http.ResponseWriter, r *http.Request) {
	if err := s.App.DeleteUser(r.Context(), r.PathValue("id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) getUserByUsername(w http.ResponseWriter, r *http.Request) {
	u, err := s.App.UserByUsername(r.Context(), r.PathValue("username"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, u)
}
