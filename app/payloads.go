package app

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/rookery/rookery"
)

// postPayloads keeps the decoded payloads of the latest post events, so that the consumer groups
// one event goes to (a PostCreated goes to seven in a process) decode its JSON once between them.
// An entry is shared: the groups read it and never change it (its slices included). It is found by
// the event's id and used only if the payload is the same bytes, so an id used twice (a test's
// events, say) cannot give one event another's payload.
type postPayloads struct {
	mu       sync.Mutex
	now, old map[string]decodedPost // two generations: now becomes old once it holds max
	max      int
}

type decodedPost struct {
	raw []byte
	p   PostPayload
}

// postPayloadsKept is how many events' payloads a generation keeps: the groups handle one event
// within moments of each other while they keep up, and a group far behind decodes its own.
const postPayloadsKept = 1024

func newPostPayloads(max int) *postPayloads {
	return &postPayloads{now: map[string]decodedPost{}, max: max}
}

// postPayload returns the payload of ev, a post event, decoded.
func (a *App) postPayload(ev rookery.Event) (PostPayload, error) {
	c := a.postPayloads
	c.mu.Lock()
	d, ok := c.now[ev.ID]
	if !ok {
		d, ok = c.old[ev.ID]
	}
	c.mu.Unlock()
	if ok && bytes.Equal(d.raw, ev.Payload) {
		return d.p, nil
	}
	var p PostPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return PostPayload{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.now) >= c.max {
		c.old, c.now = c.now, make(map[string]decodedPost, c.max)
	}
	c.now[ev.ID] = decodedPost{raw: bytes.Clone(ev.Payload), p: p}
	return p, nil
}
