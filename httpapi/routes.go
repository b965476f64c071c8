package httpapi

import (
	"net/http"
	"strings"

	"github.com/rookery/rookery"
)

// routes registers every route of the API. /v1 routes need a bearer token (s.authed).
func (s *server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", s.Metrics.Handler())

	if s.App == nil { // --role worker serves only the operations routes
		s.mux.HandleFunc("/", s.notFound)
		return
	}
	s.mux.Handle("PUT /v1/users/{id}", s.authed(s.putUser))
	s.mux.Handle("GET /v1/users/{id}", s.authed(s.getUser))
	s.mux.Handle("DELETE /v1/users/{id}", s.authed(s.deleteUser))
	s.mux.Handle("GET /v1/usernames/{username}", s.authed(s.getUserByUsername))
	s.mux.Handle("GET /v1/users/{id}/export", s.authed(s.export))

	s.mux.Handle("PUT /v1/users/{id}/following/{target}", s.authed(s.follow))
	s.mux.Handle("DELETE /v1/users/{id}/following/{target}", s.authed(s.unfollow))
	s.mux.Handle("GET /v1/users/{id}/following/{target}", s.authed(s.followStatus))
	s.mux.Handle("GET /v1/users/{id}/following", s.authed(s.listFollowing))
	s.mux.Handle("GET /v1/users/{id}/followers", s.authed(s.listFollowers))
	s.mux.Handle("PUT /v1/users/{id}/blocks/{target}", s.authed(s.block))
	s.mux.Handle("DELETE /v1/users/{id}/blocks/{target}", s.authed(s.unblock))
	s.mux.Handle("GET /v1/users/{id}/blocks/{target}", s.authed(s.blockStatus))
	s.mux.Handle("GET /v1/users/{id}/blocks", s.authed(s.listBlocks))
	s.mux.Handle("PUT /v1/users/{id}/mutes/{target}", s.authed(s.mute))
	s.mux.Handle("DELETE /v1/users/{id}/mutes/{target}", s.authed(s.unmute))
	s.mux.Handle("GET /v1/users/{id}/mutes/{target}", s.authed(s.muteStatus))
	s.mux.Handle("GET /v1/users/{id}/mutes", s.authed(s.listMutes))

	s.mux.Handle("POST /v1/posts", s.authed(s.idempotent(s.createPost)))
	s.mux.Handle("GET /v1/posts/{id}", s.authed(s.getPost))
	s.mux.Handle("PATCH /v1/posts/{id}", s.authed(s.editPost))
	s.mux.Handle("DELETE /v1/posts/{id}", s.authed(s.deletePost))
	s.mux.Handle("PUT /v1/posts/{id}/likes/{user}", s.authed(s.likePost))
	s.mux.Handle("DELETE /v1/posts/{id}/likes/{user}", s.authed(s.unlikePost))
	s.mux.Handle("GET /v1/posts/{id}/likes", s.authed(s.listLikes))
	s.mux.Handle("POST /v1/posts/{id}/comments", s.authed(s.idempotent(s.addComment)))
	s.mux.Handle("GET /v1/posts/{id}/comments", s.authed(s.listComments))
	s.mux.Handle("DELETE /v1/posts/{id}/comments/{comment}", s.authed(s.deleteComment))
	s.mux.Handle("GET /v1/users/{id}/posts", s.authed(s.authorPosts))
	s.mux.Handle("GET /v1/tags/{tag}/posts", s.authed(s.tagPosts))
	s.mux.Handle("GET /v1/feed", s.authed(s.feed))
	s.mux.Handle("GET /v1/stream", s.streamAuth(s.stream))
	s.mux.Handle("POST /v1/stream/tickets", s.authed(s.streamTicket))

	s.mux.Handle("GET /v1/notifications", s.authed(s.listNotifications))
	s.mux.Handle("GET /v1/notifications/unread_count", s.authed(s.unreadCount))
	s.mux.Handle("POST /v1/notifications/read", s.authed(s.markRead))

	s.mux.Handle("POST /v1/activities", s.authed(s.recordActivity))
	s.mux.Handle("GET /v1/users/{id}/streak", s.authed(s.getStreak))
	s.mux.Handle("GET /v1/users/{id}/points", s.authed(s.getPoints))
	s.mux.Handle("GET /v1/leaderboards/streaks", s.authed(s.streakBoard))
	s.mux.Handle("GET /v1/leaderboards/authors", s.authed(s.authorBoard))

	// Webhook endpoints, server-scope tokens only.
	s.mux.Handle("POST /v1/webhooks", s.authed(s.createWebhook))
	s.mux.Handle("GET /v1/webhooks", s.authed(s.listWebhooks))
	s.mux.Handle("GET /v1/webhooks/{id}", s.authed(s.getWebhook))
	s.mux.Handle("PATCH /v1/webhooks/{id}", s.authed(s.updateWebhook))
	s.mux.Handle("DELETE /v1/webhooks/{id}", s.authed(s.deleteWebhook))
	s.mux.Handle("POST /v1/webhooks/{id}/rotate", s.authed(s.rotateWebhook))
	s.mux.Handle("POST /v1/webhooks/{id}/test", s.authed(s.testWebhook))

	// Operations of the event pipeline, server-scope tokens only.
	s.mux.Handle("GET /v1/admin/dlq/{group}", s.authed(s.listDeadLetters))
	s.mux.Handle("GET /v1/admin/dlq/{group}/{id}", s.authed(s.getDeadLetter))
	s.mux.Handle("POST /v1/admin/dlq/{group}/{id}/replay", s.authed(s.replayDeadLetter))
	s.mux.Handle("DELETE /v1/admin/dlq/{group}/{id}", s.authed(s.dropDeadLetter))
	s.mux.Handle("POST /v1/admin/streaks/repair", s.authed(s.repairStreaks))
	s.mux.Handle("POST /v1/admin/backup", s.authed(s.backup))

	// Anything else is a problem+json 404 (or 405 for a known path with another method).
	s.mux.HandleFunc("/", s.notFound)
}

// notFound answers requests no route matches: 405 with Allow if the path has routes for other
// methods, 404 otherwise.
func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.problemStatus(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed here")
		return
	}
	s.problem(w, r, rookery.E(rookery.NotFound, "no such route"))
}
