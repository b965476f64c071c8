package httpapi

import (
	"net/http"

	"github.com/rookery/rookery/app"
)

func (s *server) putUser(w http.ResponseWriter, r *http.Request) {
	var in app.UserInput
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	u, created, err := s.App.PutUser(r.Context(), r.PathValue("id"), in)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	encode(w, status, u)
}

func (s *server) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := s.App.User(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, u)
}

func (s *server) getUserByUsername(w http.ResponseWriter, r *http.Request) {
	u, err := s.App.UserByUsername(r.Context(), r.PathValue("username"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, u)
}
