package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/auth"
	"github.com/rookery/rookery/web"
)

// demo serves the demo web client at /demo/ and POST /demo/session, which signs anyone in as any
// user (making the user if needed) with a 12-hour token: a demo, never a production mode, so serve
// refuses it beside a shared store and says so loudly in the log and on the page.
func demo(next http.Handler, a *app.App, secret []byte, log *slog.Logger) http.Handler {
	log.Warn("DEMO MODE: /demo/ signs anyone in as any user, without a password. Never expose this server.")
	static := http.StripPrefix("/demo/", http.FileServerFS(web.Files))
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.Handle("GET /demo/", static)
	mux.HandleFunc("POST /demo/session", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			User string `json:"user"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&in); err != nil || !rookery.ValidUserID(in.User) {
			http.Error(w, `{"detail":"user must be 1 to 64 of A-Z, a-z, 0-9, _ and -"}`, http.StatusBadRequest)
			return
		}
		server := rookery.WithCaller(r.Context(), rookery.Caller{UserID: "demo", Server: true})
		if _, err := a.User(server, in.User); rookery.IsKind(err, rookery.NotFound) {
			// A username from the id: lower case, '-' as '_', 3 to 30 characters.
			name := strings.ReplaceAll(strings.ToLower(in.User), "-", "_")
			if len(name) < 3 {
				name += "_demo"
			}
			name = name[:min(len(name), 30)]
			_, _, err = a.PutUser(server, in.User, app.UserInput{Username: name, DisplayName: &in.User})
			if err != nil {
				http.Error(w, `{"detail":"could not make the user (is the username taken?)"}`, http.StatusConflict)
				return
			}
		} else if err != nil {
			http.Error(w, `{"detail":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		tok, err := auth.Mint(secret, in.User, false, 12*time.Hour, time.Now())
		if err != nil {
			http.Error(w, `{"detail":"internal"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": in.User, "token": tok})
	})
	return mux
}
