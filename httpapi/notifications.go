package httpapi

import (
	"context"
	"net/http"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

func (s *server) listNotifications(w http.ResponseWriter, r *http.Request) {
	unread := false
	switch r.URL.Query().Get("unread") {
	case "", "false":
	case "true":
		unread = true
	default:
		s.problem(w, r, rookery.FieldErrors{{Name: "unread", Reason: "must be true or false"}}.Err("httpapi.listNotifications"))
		return
	}
	servePage(s, w, r, "", func(ctx context.Context, _, cursor string, limit int) (app.Page[app.Notification], error) {
		return s.App.Notifications(ctx, unread, cursor, limit)
	})
}

func (s *server) unreadCount(w http.ResponseWriter, r *http.Request) {
	n, err := s.App.UnreadCount(r.Context())
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]int{"count": n})
}

func (s *server) markRead(w http.ResponseWriter, r *http.Request) {
	var in struct {
		IDs []string `json:"ids"`
		All bool     `json:"all"`
	}
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := s.App.MarkRead(r.Context(), in.IDs, in.All); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
