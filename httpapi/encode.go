package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"go.opentelemetry.io/otel/trace"
)

// maxBody is the largest request body (API.md: 64 KiB); larger is 413.
const maxBody = 64 << 10

var errTooLarge = rookery.E(rookery.Op("httpapi.decode"), rookery.TooLarge, "the request body is larger than 64 KiB")

// decode reads r's JSON body into v: at most maxBody bytes, Content-Type application/json, UTF-8,
// one JSON value, no unknown fields. Its errors say which field is wrong and how, and are Invalid, or
// TooLarge for a body over the limit.
func decode(r *http.Request, v any) error {
	const op rookery.Op = "httpapi.decode"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return rookery.E(op, rookery.Invalid, "Content-Type must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err == nil && !utf8.Valid(body) {
		// JSON is UTF-8 (API.md); the decoder would put U+FFFD in place of each bad byte, and
		// store text that is not what the client sent.
		return rookery.E(op, rookery.Invalid, "the body is not valid UTF-8")
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			if dec.More() || dec.Decode(&struct{}{}) != io.EOF {
				return rookery.E(op, rookery.Invalid, "the body must hold exactly one JSON value")
			}
			return nil
		}
		// Unknown top-level fields are reported first, every one by name (the decoder names one).
		if uerr := unknownFields(op, body, v); uerr != nil {
			return uerr
		}
	}
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return errTooLarge
	case errors.Is(err, io.EOF):
		return rookery.E(op, rookery.Invalid, "the request body is empty; a JSON object is required")
	case errors.As(err, &typeErr):
		name := typeErr.Field
		if name == "" {
			return rookery.E(op, rookery.Invalid, "the body must be a JSON object")
		}
		return rookery.FieldErrors{{Name: name, Reason: "must be of type " + jsonType(typeErr.Type.Kind().String())}}.Err(op)
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return rookery.E(op, rookery.Invalid, "the body is not valid JSON")
	case errors.Is(err, rookery.ErrTimeFormat):
		if ferr := timeFields(op, body, v); ferr != nil {
			return ferr
		}
		return rookery.E(op, rookery.Invalid, err.Error())
	}
	var fe rookery.FieldErrors
	if errors.As(err, &fe) {
		return fe.Err(op)
	}
	return rookery.E(op, rookery.Invalid, "the body does not match the expected shape (an unknown field in a nested object?)")
}

// unknownFields returns a field error for every top-level key of the JSON object body that v (a
// pointer to a struct) has no field for. Bodies that are not objects are left to the decoder.
func unknownFields(op rookery.Op, body []byte, v any) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	known := jsonFields(reflect.TypeOf(v).Elem())
	var fe rookery.FieldErrors
	for name := range raw {
		if _, ok := known[name]; !ok {
			fe.Add(name, "is not a known field")
		}
	}
	sort.Slice(fe, func(i, j int) bool { return fe[i].Name < fe[j].Name })
	return fe.Err(op)
}

// timeFields returns a field error for every top-level time field of the JSON object body (v is a
// pointer to a struct) whose value is not a time; nil if none is (the bad time is nested).
func timeFields(op rookery.Op, body []byte, v any) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	timeType := reflect.TypeFor[rookery.Time]()
	var fe rookery.FieldErrors
	for name, typ := range jsonFields(reflect.TypeOf(v).Elem()) {
		val, ok := raw[name]
		if ok && (typ == timeType || typ == reflect.PointerTo(timeType)) && new(rookery.Time).UnmarshalJSON(val) != nil {
			fe.Add(name, "must be an RFC 3339 time, such as 2026-11-22T10:04:05.123Z")
		}
	}
	sort.Slice(fe, func(i, j int) bool { return fe[i].Name < fe[j].Name })
	return fe.Err(op)
}

// jsonFields returns the JSON names of struct type t's fields, with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	names := map[string]reflect.Type{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = f.Type
	}
	return names
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	}
	return "number"
}

// encode writes v as JSON with status.
func encode(w http.ResponseWriter, status int, v any) {
	a, ok := v.(jsonAppender)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if v != nil {
			json.NewEncoder(w).Encode(v)
		}
		return
	}
	bp := replyBufs.Get().(*[]byte)
	b := appendReply((*bp)[:0], a)
	write(w, status, b)
	if cap(b) <= 1<<20 {
		*bp = b
		replyBufs.Put(bp)
	}
}

// appendReply appends a's encoding to b, ended as json.Encoder ends a value.
func appendReply(b []byte, a jsonAppender) []byte { return append(a.AppendJSON(b), '\n') }

// write writes the JSON reply b whole, with its length: one write, where a streamed reply past
// the writer's 4 KB buffer goes out in chunks.
func write(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// jsonAppender is a reply that encodes itself as encoding/json would, without reflection
// (rookery.Post.AppendJSON).
type jsonAppender interface{ AppendJSON(b []byte) []byte }

// replyBufs are the buffers of the replies that encode themselves.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// statusOf is the one table from error Kind to HTTP status.
var statusOf = map[rookery.Kind]int{
	rookery.Invalid:         http.StatusBadRequest,
	rookery.NotFound:        http.StatusNotFound,
	rookery.Conflict:        http.StatusConflict,
	rookery.Unauthenticated: http.StatusUnauthorized,
	rookery.Forbidden:       http.StatusForbidden,
	rookery.TooLarge:        http.StatusRequestEntityTooLarge,
	rookery.RateLimited:     http.StatusTooManyRequests,
	rookery.Unavailable:     http.StatusServiceUnavailable,
	rookery.Internal:        http.StatusInternalServerError,
}

// problem is the body of every error reply (RFC 9457, application/problem+json).
type problem struct {
	Type   string               `json:"type"`
	Title  string               `json:"title"`
	Status int                  `json:"status"`
	Detail string               `json:"detail"`
	Code   string               `json:"code"`
	Fields []rookery.FieldError `json:"fields,omitzero"` // non-nil, maybe empty, with code invalid
	ID     string               `json:"request_id,omitempty"`
}

// problem writes err as problem+json. Only the Kind and the error's client-safe message reach the
// client; Internal errors are logged with their cause and shown only as "internal error".
func (s *server) problem(w http.ResponseWriter, r *http.Request, err error) {
	kind := rookery.KindOf(err)
	if kind == rookery.Other {
		kind = rookery.Internal
	}
	status := statusOf[kind]
	p := problem{
		Type:   "urn:rookery:problem:" + kind.String(),
		Title:  http.StatusText(status),
		Status: status,
		Detail: rookery.Message(err),
		Code:   kind.String(),
		ID:     requestIDFrom(r.Context()),
	}
	if kind == rookery.Internal {
		p.Detail = "internal error; the request id identifies it in the server's log"
		attrs := []slog.Attr{slog.String("request_id", p.ID), slog.String("route", r.Pattern), slog.Any("err", err)}
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.Log.LogAttrs(r.Context(), slog.LevelError, "internal error", attrs...)
	}
	if p.Detail == "" {
		p.Detail = p.Title
	}
	if kind == rookery.Invalid { // the fields at fault; none when the request as a whole is (a body that is not JSON)
		p.Fields = []rookery.FieldError{}
		if fe := rookery.FieldErrors(nil); errors.As(err, &fe) {
			p.Fields = fe
		}
	}
	// 429 and 503 always say when to come back; another error only with a hint (a Conflict that
	// ends by itself).
	if d, ok := rookery.RetryAfterOf(err); ok || kind == rookery.RateLimited || kind == rookery.Unavailable {
		secs := int64(1)
		if ok {
			secs = max(1, int64((d+time.Second-1)/time.Second))
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if kind == rookery.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rookery"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(p)
}

// problemStatus writes a problem for a status with no Kind of its own (405), coded "invalid".
func (s *server) problemStatus(w http.ResponseWriter, r *http.Request, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(problem{
		Type: "urn:rookery:problem:invalid", Title: http.StatusText(status), Status: status,
		Detail: detail, Code: rookery.Invalid.String(), Fields: []rookery.FieldError{}, ID: requestIDFrom(r.Context()),
	})
}

// serveCreate answers a create request: it decodes the body into an In, calls create, and
// encodes the result with 201 if it was created, 200 if it already existed (a retry).
func serveCreate[In, Out any](s *server, w http.ResponseWriter, r *http.Request, create func(ctx context.Context, in In) (Out, bool, error)) {
	var in In
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	out, created, err := create(r.Context(), in)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	encode(w, status, out)
}

// listParams reads ?limit= (1..100, default 20) and ?cursor= of a list request.
func listParams(r *http.Request) (limit int, cursor string, err error) {
	limit = 20
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			return 0, "", rookery.FieldErrors{{Name: "limit", Reason: "must be a whole number from 1 to 100"}}.Err("httpapi.listParams")
		}
	}
	return limit, q.Get("cursor"), nil
}

// listReply is every list's shape: {"items": [...], "next_cursor": "..." | null}.
type listReply[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func reply[T any](p app.Page[T]) any {
	out := listReply[T]{Items: p.Items}
	if out.Items == nil {
		out.Items = []T{}
	}
	if p.Next != "" {
		out.NextCursor = &p.Next
	}
	if posts, ok := any(out).(listReply[rookery.Post]); ok {
		return postsReply(posts)
	}
	return out
}

// postBodies keeps the encoded bodies of the posts pages show most (rookery.PostBodies: a kept body
// serves only a post it encodes, so one for the process serves every server): as many as the posts
// the app keeps rendered.
var postBodies = rookery.NewPostBodies(2000)

// postsReply is a list of posts, which encodes itself.
type postsReply listReply[rookery.Post]

// AppendJSON appends r as encoding/json encodes listReply[rookery.Post] (TestPostsReplyJSON).
func (r postsReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"items":[`...)
	for i, p := range r.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = postBodies.AppendJSON(b, p)
	}
	b = append(b, `],"next_cursor":`...)
	cursor, _ := json.Marshal(r.NextCursor) // a string or null
	b = append(b, cursor...)
	return append(b, '}')
}
