package httpapi

import "net/http"

func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := listParams(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	page, err := s.App.DeadLetters(r.Context(), r.PathValue("group"), cursor, limit)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, reply(page))
}

func (s *server) getDeadLetter(w http.ResponseWriter, r *http.Request) {
	d, err := s.App.DeadLetter(r.Context(), r.PathValue("group"), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, d)
}

func (s *server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	if err := s.App.ReplayDeadLetter(r.Context(), r.PathValue("group"), r.PathValue("id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) dropDeadLetter(w http.ResponseWriter, r *http.Request) {
	if err := s.App.DropDeadLetter(r.Context(), r.PathValue("group"), r.PathValue("id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
