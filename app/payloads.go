package app

import (
	"encoding/json"
	"reflect"
	"sync"

	"github.com/rookery/rookery"
)

// payloads keeps the latest events' decoded payloads, so that the consumer groups that each handle
// an event decode it once between them: eight groups handle every PostCreated, three every
// ActivityRecorded. A value is kept by event id and the type it was decoded into (groups read some
// payloads into structs of their own), for the last payloadsKept decodings: a group far behind the
// others decodes anew. Values are shared between groups: no handler may change one.
type payloads struct {
	mu   sync.Mutex
	byID map[payloadKey]any
	ring [payloadsKept]payloadKey // the kept keys, oldest at next once full
	next int
}

type payloadKey struct {
	id  string
	typ reflect.Type
}

// payloadsKept is how many decoded payloads are kept: a few seconds of events at thousands a
// second, about a megabyte.
const payloadsKept = 8192

// payloadOf returns ev's payload decoded into a T (json.Unmarshal's), from ps if it was decoded
// into one lately. A payload that does not decode is not kept.
func payloadOf[T any](ps *payloads, ev rookery.Event) (T, error) {
	k := payloadKey{ev.ID, reflect.TypeFor[T]()}
	ps.mu.Lock()
	v, ok := ps.byID[k]
	ps.mu.Unlock()
	if ok {
		return v.(T), nil
	}
	var p T
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return p, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.byID[k]; ok { // another group decoded it meanwhile
		return p, nil
	}
	if ps.byID == nil {
		ps.byID = make(map[payloadKey]any, payloadsKept)
	}
	if old := ps.ring[ps.next]; old.typ != nil {
		delete(ps.byID, old)
	}
	ps.ring[ps.next], ps.byID[k] = k, p
	ps.next = (ps.next + 1) % payloadsKept
	return p, nil
}
