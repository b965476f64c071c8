package embedded

import (
	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// Staging. On the table store's engine (Options.Engine), the log can take the outbox's events out
// of the store's transactions and append them in the transaction's own batch (the store's Stager,
// table/pebble): an event is then in the log the moment its change commits, and nothing sits in
// the outbox for a relay to read, decode, append and delete. The outbox's guarantee holds as it
// did: the change and its event are one atomic, synced batch.
//
// A staged event takes the way of an Append (reserve offsets, commit, publish in reservation
// order) without its de-duplication: it is written once, by the transaction that causes it, and
// no relay can append it again.
//
// Package local wires it (store.SetStager(log) and Outbox.Direct) when the log shares the store's
// engine.

// Takes implements table/pebble's Stager: it takes the outbox's writes.
func (l *Log) Takes(w table.Write) bool {
	_, ok := events.OutboxEvent(w)
	return ok
}

// Stage implements table/pebble's Stager: it appends the events of ws (writes it Takes) to b.
func (l *Log) Stage(b *cpebble.Batch, ws []table.Write) (func(error), error) {
	const op rookery.Op = "embedded.Stage"
	header := appendStoredHeader(nil, l.clock.Now().UnixNano(), false)
	added := make([]appended, 0, len(ws))
	for _, w := range ws {
		enc, _ := events.OutboxEvent(w)
		ev, err := events.DecodeEvent(enc)
		if err != nil {
			return nil, rookery.E(op, rookery.Internal, "an outbox event does not decode", err)
		}
		val := append(append(make([]byte, 0, len(header)+len(enc)), header...), enc...)
		added = append(added, appended{p: l.partition(ev.Key), id: ev.ID, val: val, ev: ev, ok: true})
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.broken != nil {
		return nil, rookery.E(op, rookery.Internal, "the event log failed earlier", l.broken)
	}
	pub, err := l.reserveLocked(b, added)
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	return func(err error) { l.publish(pub, err) }, nil
}
