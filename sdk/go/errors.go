package rookery

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Check returns nil for a success (2xx) and the *Error of a problem reply otherwise: pass it what
// a generated ...WithResponse method returned (its HTTPResponse and Body).
//
//	r, err := c.GetHomeFeedWithResponse(ctx, nil)
//	if err = rookery.Check(r.HTTPResponse, r.Body, err); err != nil { ... }
func Check(resp *http.Response, body []byte, err error) error {
	if err != nil {
		return err
	}
	if resp.StatusCode < 300 {
		return nil
	}
	e := &Error{Status: resp.StatusCode, Code: "internal", Detail: http.StatusText(resp.StatusCode)}
	var p struct {
		Code, Title, Detail string
		Fields              []FieldError
		RequestID           string `json:"request_id"`
	}
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Title, e.Detail, e.Fields, e.RequestID = p.Code, p.Title, p.Detail, p.Fields, p.RequestID
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
