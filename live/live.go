// Package live carries stream events from where they are appended (the consumers) to the streams
// open on this process (GET /v1/stream). A Hub holds this process's open streams; a bus takes a
// published event to the hubs of every process: Local within one process, natsbus over NATS
// between processes. Nothing here stores an event: the stream logs (package app) do, and a
// stream that misses a published event reads it from its log at the next event or heartbeat.
package live

import (
	"sync"
)

// Message is one stream event on its way to the open streams of its user.
type Message struct {
	Seq  uint64
	Type string
	Data []byte
}

// Subscription is one open stream's share of its user's messages. Messages arrive on C in the
// order they were delivered to the hub. Dropped is closed if the hub had to drop the stream for
// falling behind (its buffer was full): its messages stop, and it should end so that its client
// resumes from the last event it got.
type Subscription struct {
	C       <-chan *Message // shared by every stream of the user: read only
	Dropped <-chan struct{}

	hub     *Hub
	user    string
	ch      chan *Message
	dropped chan struct{}
	once    sync.Once
}

// Close ends the subscription.
func (s *Subscription) Close() { s.hub.remove(s) }

// Hub is the open streams of one process, by user.
type Hub struct {
	// Watch, if set, is told when a user's first stream opens (true) and their last one closes
	// (false), under the hub's lock, so that calls for one user come in order: a bus subscribes
	// then to that user's messages from other processes.
	Watch func(user string, on bool)
	// OnDrop, if set, is told of every stream dropped for falling behind.
	OnDrop func()

	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
}

// Subscribe opens a subscription to user's messages, which may fall buffer messages behind before
// it is dropped.
func (h *Hub) Subscribe(user string, buffer int) *Subscription {
	ch, dropped := make(chan *Message, buffer), make(chan struct{})
	s := &Subscription{C: ch, Dropped: dropped, hub: h, user: user, ch: ch, dropped: dropped}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[*Subscription]struct{}{}
	}
	set := h.subs[user]
	if set == nil {
		set = map[*Subscription]struct{}{}
		h.subs[user] = set
		if h.Watch != nil {
			h.Watch(user, true)
		}
	}
	set[s] = struct{}{}
	return s
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.subs[s.user]
	if _, ok := set[s]; !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.user)
		if h.Watch != nil {
			h.Watch(s.user, false)
		}
	}
}

// Deliver hands m to every open stream of user without waiting: a stream whose buffer is full is
// dropped (Subscription.Dropped), so that no stream slows the others or the publisher.
func (h *Hub) Deliver(user string, m Message) {
	h.mu.Lock()
	var drop []*Subscription
	for s := range h.subs[user] {
		select {
		case s.ch <- &m:
		default:
			drop = append(drop, s)
		}
	}
	h.mu.Unlock()
	for _, s := range drop {
		s.once.Do(func() {
			close(s.dropped)
			if h.OnDrop != nil {
				h.OnDrop()
			}
		})
		s.Close()
	}
}

// Open returns how many users have a stream open on this process.
func (h *Hub) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Local is the bus of a single process: it delivers every published event to its hub.
type Local struct{ Hub *Hub }

// Publish implements app.StreamPublisher.
func (l Local) Publish(user string, seq uint64, typ string, data []byte) {
	l.Hub.Deliver(user, Message{Seq: seq, Type: typ, Data: data})
}
