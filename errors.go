package rookery

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind classifies an error by what the caller can do about it. Kinds are few and are only ever
// appended to: their order is part of nothing, but their meaning is part of the API (httpapi maps
// each Kind to one HTTP status, and workers retry only Unavailable).
type Kind uint8

const (
	Other           Kind = iota // unclassified; treated as Internal at the edges
	Invalid                     // the request is malformed or violates a rule; do not retry
	NotFound                    // the item does not exist (or the caller may not know it does)
	Conflict                    // a condition failed: the item exists, changed, or is taken
	Unauthenticated             // no valid credentials
	Forbidden                   // valid credentials, but not allowed
	TooLarge                    // the request or an item exceeds a size limit
	RateLimited                 // too many requests; retry later
	Unavailable                 // a dependency is down or throttling; transient, safe to retry
	Internal                    // a bug or an unexpected state; logged, never shown in detail
)

var kindNames = [...]string{
	Other:           "other",
	Invalid:         "invalid",
	NotFound:        "not_found",
	Conflict:        "conflict",
	Unauthenticated: "unauthenticated",
	Forbidden:       "forbidden",
	TooLarge:        "too_large",
	RateLimited:     "rate_limited",
	Unavailable:     "unavailable",
	Internal:        "internal",
}

// String returns the Kind's code as API.md spells it (e.g. "not_found").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error is Rookery's one error type. Op names the operation that failed ("table.Put",
// "pebble.Query"), Kind classifies it, Msg is a message that is safe to show a client, and Err is
// the cause, which may carry engine details that must never reach a client.
type Error struct {
	Op   string // e.g. "pebble.Put"
	Kind Kind
	Msg  string
	Err  error
}

// Op names an operation, "package.Method" by convention: const op rookery.Op = "pebble.Put".
type Op string

// E builds an *Error from its arguments, in any order: an Op is the Op, a string is the
// client-safe Msg, a Kind is the Kind and an error is the cause. If no Kind is given, the cause's
// Kind is inherited. E panics on any other argument type, which is a programming error.
func E(args ...any) error {
	e := &Error{}
	for _, a := range args {
		switch a := a.(type) {
		case Op:
			e.Op = string(a)
		case string:
			e.Msg = a
		case Kind:
			e.Kind = a
		case *Error:
			e.Err = a
		case error:
			e.Err = a
		case nil:
		default:
			panic(fmt.Sprintf("rookery.E: bad argument %T", a))
		}
	}
	if e.Kind == Other && e.Err != nil {
		e.Kind = KindOf(e.Err)
	}
	return e
}

// Errorf is E(op, kind, fmt.Sprintf(format, args...)).
func Errorf(op Op, kind Kind, format string, args ...any) error {
	return &Error{Op: string(op), Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	if e.Kind != Other {
		b.WriteString(e.Kind.String())
	}
	if e.Msg != "" {
		if e.Kind != Other {
			b.WriteString(": ")
		}
		b.WriteString(e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of the outermost *Error in err's chain that has one, or Internal for a
// non-nil error that has none, or Other for nil.
func KindOf(err error) Kind {
	if err == nil {
		return Other
	}
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			break
		}
		if e.Kind != Other {
			return e.Kind
		}
		err = e.Err
	}
	return Internal
}

// IsKind reports whether err's Kind is k.
func IsKind(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Message returns the client-safe message of the outermost *Error in err's chain that has one, or
// "" if none does. Causes are never included.
func Message(err error) string {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		if e.Msg != "" {
			return e.Msg
		}
		err = e.Err
	}
	return ""
}

// retryLater is a RateLimited or Unavailable error that says when to retry.
type retryLater struct {
	error
	after time.Duration
}

func (e retryLater) Unwrap() error { return e.error }

// RetryAfter returns err (of Kind RateLimited or Unavailable, or a Conflict that ends by itself)
// carrying a hint that the request may succeed after d; the HTTP layer sends it as Retry-After.
func RetryAfter(err error, d time.Duration) error { return retryLater{err, d} }

// RetryAfterOf returns the hint RetryAfter put in err's chain.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r retryLater
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
