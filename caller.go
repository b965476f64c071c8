package rookery

import (
	"context"
	"time"
)

// Caller is who makes a request: a user, or the app's own backend acting with a server-scope token.
type Caller struct {
	// UserID is the token's subject: the calling user, or for a server token the app's name.
	UserID string
	// Server is true for a server-scope token, which may act for any user.
	Server bool
	// OnBehalfOf is the user a server token acts for (X-On-Behalf-Of), or "".
	OnBehalfOf string
	// Expires is when the token stops being accepted (a stream ends then); zero: never.
	Expires time.Time
}

// Acting returns the user the request acts as: OnBehalfOf for a server token that names one,
// otherwise UserID.
func (c Caller) Acting() string {
	if c.Server && c.OnBehalfOf != "" {
		return c.OnBehalfOf
	}
	return c.UserID
}

type callerKey struct{}

// WithCaller returns a context that carries c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller carried by ctx, and whether there is one.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// ValidUserID reports whether id is a valid user id: 1..64 characters of [A-Za-z0-9_-]. User ids
// can never contain a separator of the key schema.
func ValidUserID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
