package table

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/rookery/rookery"
)

// Position is where a page of a Query ended: the key of its last item and, for an index query, that
// item's index sort key. The next page starts strictly after it.
type Position struct {
	Key     Key
	IndexSK string
}

// Cursors seals Positions into opaque, tamper-evident cursors bound to the query they belong to, so
// a cursor that was edited, truncated, or taken from another listing is rejected as Invalid. Both
// backends use it; a cursor sealed by one process is accepted by another with the same key.
type Cursors struct {
	key []byte
}

// NewCursors returns a Cursors that signs with key. Processes that serve the same listings (API
// nodes in scale-out) must share the key; cmd derives it from the configured auth secret.
func NewCursors(key []byte) *Cursors {
	return &Cursors{key: append([]byte(nil), key...)}
}

const (
	cursorVersion = 1
	cursorMACLen  = 16
)

// Seal returns the cursor for the page of q that ended at pos.
func (c *Cursors) Seal(q Query, pos Position) string {
	payload := []byte{cursorVersion}
	for _, s := range []string{pos.Key.PK, pos.Key.SK, pos.IndexSK} {
		payload = binary.AppendUvarint(payload, uint64(len(s)))
		payload = append(payload, s...)
	}
	payload = append(payload, c.mac(q, payload)...)
	return base64.RawURLEncoding.EncodeToString(payload)
}

// Open returns the position sealed in q.Cursor, or an Invalid error if the cursor is malformed, was
// tampered with, or belongs to another query.
func (c *Cursors) Open(op rookery.Op, q Query) (Position, error) {
	bad := rookery.E(op, rookery.Invalid, "malformed or tampered cursor")
	raw, err := base64.RawURLEncoding.Strict().DecodeString(q.Cursor)
	if err != nil || len(raw) < 1+cursorMACLen || raw[0] != cursorVersion {
		return Position{}, bad
	}
	payload, sum := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if !hmac.Equal(sum, c.mac(q, payload)) {
		return Position{}, bad
	}
	rest := payload[1:]
	var parts [3]string
	for i := range parts {
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return Position{}, bad
		}
		parts[i] = string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
	}
	if len(rest) != 0 {
		return Position{}, bad
	}
	return Position{Key: Key{PK: parts[0], SK: parts[1]}, IndexSK: parts[2]}, nil
}

// mac binds payload to everything that identifies q's listing except its limit and cursor.
func (c *Cursors) mac(q Query, payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	var b []byte
	for _, s := range []string{q.Index, q.PK, q.SK.Value, q.SK.Value2} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(q.SK.Op))
	if q.Desc {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	h.Write(b)
	h.Write(payload)
	return h.Sum(nil)[:cursorMACLen]
}
