package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/ratelimit"
)

// RateLimits are the limits on the /v1 routes (docs/api.md, "Rate limits"). A user token's requests
// count per user and class of route; a server token's, per token subject, in one larger bucket for
// every class (it acts for many users); a request without a valid token, per client address.
type RateLimits struct {
	Limiter   ratelimit.Limiter // nil: no limits
	Read      ratelimit.Policy  // GET and HEAD
	Write     ratelimit.Policy  // every other method
	Expensive ratelimit.Policy  // reads past the first page of the feed, a tag or an author's posts
	Server    ratelimit.Policy
	Anonymous ratelimit.Policy
	// TrustedProxies are the peers (load balancers) whose X-Forwarded-For names the client address
	// that Anonymous counts by; none: the peer is the client.
	TrustedProxies []netip.Prefix

	warned atomic.Int64 // Unix ns of the last warning that the limiter failed
}

// limitClass names a request's class of route, as the rate-limit fields name its policy.
func limitClass(r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "write"
	}
	switch r.Pattern {
	case "GET /v1/users/{id}/export":
		return "expensive"
	case "GET /v1/feed", "GET /v1/tags/{tag}/posts", "GET /v1/users/{id}/posts":
		if r.URL.Query().Has("cursor") {
			return "expensive"
		}
	}
	return "read"
}

// policy returns the class's policy and the bucket key of caller c (nil: no valid token).
func (l *RateLimits) policy(r *http.Request, c *rookery.Caller) (name string, p ratelimit.Policy, key string) {
	switch {
	case c == nil:
		return "anonymous", l.Anonymous, "addr:" + clientAddr(r, l.TrustedProxies)
	case c.Server:
		return "server", l.Server, "server:" + c.UserID
	}
	switch name = limitClass(r); name {
	case "write":
		p = l.Write
	case "expensive":
		p = l.Expensive
	default:
		p = l.Read
	}
	return name, p, name + ":" + c.UserID
}

// limit counts the request against its caller's limit (c nil: its address's) and writes the
// rate-limit fields; it reports false, having answered 429, when the request is over the limit. A
// limiter that fails lets the request through: its store being down must not take the API down.
func (s *server) limit(w http.ResponseWriter, r *http.Request, c *rookery.Caller) bool {
	l := s.Limits
	if l == nil || l.Limiter == nil {
		return true
	}
	name, p, key := l.policy(r, c)
	if p.Unlimited() {
		return true
	}
	d, err := l.Limiter.Allow(r.Context(), key, p)
	if err != nil {
		if now := time.Now().UnixNano(); now-l.warned.Load() > int64(10*time.Second) {
			l.warned.Store(now)
			s.Log.Warn("the rate limiter failed; requests are let through until it answers", "err", err)
		}
		return true
	}
	h := w.Header()
	reset := int64((d.ResetAfter + time.Second - 1) / time.Second)
	// The IETF fields (draft-ietf-httpapi-ratelimit-headers) and the X-RateLimit-* names of GitHub
	// and Mastodon (Reset: the Unix time at which the whole quota is available again).
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", name, p.Quota, int64(p.Window/time.Second)))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", name, d.Remaining, reset))
	h.Set("X-RateLimit-Limit", strconv.Itoa(p.Quota))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(d.ResetAfter).Unix(), 10))
	if !d.Allowed {
		s.problem(w, r, rookery.RetryAfter(rookery.E("httpapi.limit", rookery.RateLimited,
			fmt.Sprintf("over the %s rate limit of %d requests per %s; retry later", name, p.Quota, p.Window)), d.RetryAfter))
		return false
	}
	return true
}
