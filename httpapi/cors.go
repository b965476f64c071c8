package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// CORS lets browser apps served from other origins call the API directly (the Fetch standard's
// cross-origin resource sharing). Browsers send a token in the Authorization header, never a
// cookie, so no request carries credentials a browser would add on its own: the policy only says
// which pages may read the replies.
type CORS struct {
	// Origins are the origins allowed ("https://app.example.com"), or "*" for any. Empty: none,
	// and no CORS header is sent (pages of other origins cannot read replies).
	Origins []string
}

// corsRequestHeaders are the request headers a page may send: those of docs/api.md.
const corsRequestHeaders = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-On-Behalf-Of, X-Request-Id, traceparent, tracestate"

// corsExposedHeaders are the reply headers a page may read beyond the safelisted ones.
const corsExposedHeaders = "RateLimit, RateLimit-Policy, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, " +
	"Retry-After, X-Request-Id, Idempotent-Replayed, Content-Disposition, WWW-Authenticate"

// ParseCORSOrigin checks that o is "*" or an origin: scheme (http or https) and host, with no path,
// query or fragment; it returns it as browsers send it.
func ParseCORSOrigin(o string) (string, error) {
	if o == "*" {
		return o, nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an origin such as https://app.example.com (or * for any)", o)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// cors answers preflight requests of allowed origins and marks their other replies readable; a
// request from any other origin (or none) passes through with no CORS field (but Vary: Origin,
// unless any origin is allowed). It runs before authentication and the rate limits: a preflight
// carries no token and draws nothing.
func (s *server) cors(next http.Handler) http.Handler {
	if len(s.CORS.Origins) == 0 {
		return next
	}
	anyOrigin, allowed := false, map[string]bool{}
	for _, o := range s.CORS.Origins {
		if o, err := ParseCORSOrigin(o); err == nil { // cmd refuses the others at start
			anyOrigin = anyOrigin || o == "*"
			allowed[o] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		if !anyOrigin {
			h.Add("Vary", "Origin") // the reply depends on it: caches must not share it across origins
		}
		if origin == "" || !(anyOrigin || allowed[origin]) {
			next.ServeHTTP(w, r)
			return
		}
		if anyOrigin {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
			h.Set("Access-Control-Max-Age", "7200")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
		next.ServeHTTP(w, r)
	})
}
