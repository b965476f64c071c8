package httpapi

import (
	"net/http"

	"github.com/rookery/rookery/app"
)

// The webhook endpoints (server-scope tokens only).

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var in app.WebhookInput
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	wh, err := s.App.CreateWebhook(r.Context(), in)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusCreated, wh)
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.App.Webhooks(r.Context())
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, reply(app.Page[app.Webhook]{Items: list}))
}

func (s *server) getWebhook(w http.ResponseWriter, r *http.Request) {
	wh, err := s.App.Webhook(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, wh)
}

func (s *server) updateWebhook(w http.ResponseWriter, r *http.Request) {
	var in app.WebhookInput
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	wh, err := s.App.UpdateWebhook(r.Context(), r.PathValue("id"), in)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, wh)
}

func (s *server) rotateWebhook(w http.ResponseWriter, r *http.Request) {
	wh, err := s.App.RotateWebhookSecret(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, wh)
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.App.DeleteWebhook(r.Context(), r.PathValue("id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) testWebhook(w http.ResponseWriter, r *http.Request) {
	id, err := s.App.TestWebhook(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusAccepted, map[string]string{"msg_id": id})
}
