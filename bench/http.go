package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HTTPTarget runs requests against a Rookery server, acting for each user with one server token
// and X-On-Behalf-Of.
type HTTPTarget struct {
	Base   string // the server's base URL
	Token  string // a server-scope token
	Prefix string // the imported users' prefix
	// FeedLimit is the page size of feed and user-posts reads (DeathStarBench reads 10).
	FeedLimit int
	Client    *http.Client
}

// NewHTTPTarget returns a target with a client that keeps conns connections open.
func NewHTTPTarget(base, token, prefix string, conns int) *HTTPTarget {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns
	return &HTTPTarget{Base: strings.TrimRight(base, "/"), Token: token, Prefix: prefix, FeedLimit: DSBPageSize, Client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Do implements Target.
func (h *HTTPTarget) Do(ctx context.Context, r Request) Reply {
	u := UserID(h.Prefix, r.User)
	limit := r.pageSize(h.FeedLimit)
	var method, path string
	var body []byte
	switch r.Op {
	case OpFeed:
		method, path = http.MethodGet, fmt.Sprintf("/v1/feed?limit=%d", limit)
		if r.Cursor != "" {
			path += "&cursor=" + url.QueryEscape(r.Cursor)
		}
	case OpUser:
		method, path = http.MethodGet, fmt.Sprintf("/v1/users/%s/posts?limit=%d", u, limit)
	case OpPost:
		method, path = http.MethodPost, "/v1/posts"
		media := make([]map[string]string, r.Media)
		for i := range media {
			media[i] = map[string]string{"id": fmt.Sprintf("m%d-%d", r.User, i), "type": "image"}
		}
		body, _ = json.Marshal(map[string]any{"text": r.Text, "media": media})
	case OpFollow:
		method, path = http.MethodPut, "/v1/users/"+u+"/following/"+UserID(h.Prefix, r.Other)
	case OpUnfollow:
		method, path = http.MethodDelete, "/v1/users/"+u+"/following/"+UserID(h.Prefix, r.Other)
	case OpLike:
		method, path = http.MethodPut, "/v1/posts/"+r.PostID+"/likes/"+u
	case OpDelete:
		method, path = http.MethodDelete, "/v1/posts/"+r.PostID
	}
	req, err := http.NewRequestWithContext(ctx, method, h.Base+path, bytes.NewReader(body))
	if err != nil {
		return Reply{}
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	req.Header.Set("X-On-Behalf-Of", u)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return Reply{}
	}
	defer resp.Body.Close()
	rep := Reply{Status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 300:
		io.Copy(io.Discard, resp.Body)
	case r.Op == OpPost:
		var p struct{ ID string }
		json.NewDecoder(resp.Body).Decode(&p)
		rep.PostID = p.ID
	case r.Op == OpFeed && r.IDs:
		var page struct {
			Items      []struct{ ID string }
			NextCursor string `json:"next_cursor"`
		}
		json.NewDecoder(resp.Body).Decode(&page)
		for _, it := range page.Items {
			rep.Feed = append(rep.Feed, it.ID)
		}
		rep.Next = page.NextCursor
	default:
		io.Copy(io.Discard, resp.Body)
	}
	return rep
}
