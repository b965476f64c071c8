package rookery

import "encoding/json"

// Event is the versioned envelope of everything that other parts of Rookery react to (a post
// created, a follow, a like ...). Events are written in the same atomic write as the change that
// causes them (the outbox), relayed to the event log, and delivered at least once to every consumer
// group; consumers are idempotent by ID.
type Event struct {
	// ID identifies the event (a ULID); redeliveries carry the same ID.
	ID string `json:"id"`
	// Type and Version name the payload's schema, e.g. "PostCreated" v1.
	Type    string `json:"type"`
	Version int    `json:"version"`
	// OccurredAt is when the change was made.
	OccurredAt Time `json:"occurred_at"`
	// Key orders the event: events with the same key (a post, a follow edge, a user) are delivered
	// in the order they were written.
	Key string `json:"key"`
	// Payload is the type's JSON body.
	Payload json.RawMessage `json:"payload"`
	// Trace is the W3C traceparent of the span that made the event (the request that caused it,
	// or the consumer that handled the event that did), so that its consumers' spans continue that
	// trace; "" when tracing is off.
	Trace string `json:"trace,omitempty"`
}

// IDSource makes new unique, time-ordered ids (ULIDs in production). Code below cmd receives one
// instead of generating ids itself, so tests are deterministic.
type IDSource func() string
