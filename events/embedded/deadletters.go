package embedded

// The dead-letter queue: per group, events its consumer gave up on, listed, replayed or dropped.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/pebblekit"
)

// DeadLetter implements events.Log.
func (l *Log) DeadLetter(ctx context.Context, group string, d events.DeadLetter) error {
	const op rookery.Op = "embedded.DeadLetter"
	if err := events.CheckGroup(op, group); err != nil {
		return err
	}
	val, err := json.Marshal(d)
	if err != nil {
		return rookery.E(op, rookery.Invalid, err)
	}
	return l.write(op, func(b *cpebble.Batch) error {
		return b.Set(append(groupKey(pebblekit.LogDead, group), d.Event.ID...), val, nil)
	})
}

// write commits one synced batch built by fill, unless the log is closed.
func (l *Log) write(op rookery.Op, fill func(b *cpebble.Batch) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	b := l.db.NewBatch()
	defer b.Close()
	if err := fill(b); err != nil {
		return err
	}
	if err := b.Commit(cpebble.Sync); err != nil {
		return rookery.E(op, rookery.Internal, err)
	}
	l.wakeGroupsLocked()
	return nil
}

// DeadLetters implements events.Log.
func (l *Log) DeadLetters(ctx context.Context, group, after string, limit int) ([]events.DeadLetter, error) {
	const op rookery.Op = "embedded.DeadLetters"
	if err := events.CheckGroup(op, group); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	prefix := groupKey(pebblekit.LogDead, group)
	lower := prefix
	if after != "" {
		lower = append(append(bytes.Clone(prefix), after...), 0x00)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, rookery.E(op, rookery.Internal, err)
	}
	defer iter.Close()
	var out []events.DeadLetter
	for ok := iter.First(); ok && len(out) < limit; ok = iter.Next() {
		var d events.DeadLetter
		if err := json.Unmarshal(iter.Value(), &d); err != nil {
			return nil, rookery.E(op, rookery.Internal, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetterByID implements events.Log.
func (l *Log) DeadLetterByID(ctx context.Context, group, id string) (events.DeadLetter, error) {
	const op rookery.Op = "embedded.DeadLetterByID"
	if err := events.CheckGroup(op, group); err != nil {
		return events.DeadLetter{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return events.DeadLetter{}, rookery.E(op, rookery.Unavailable, "the event log is closed")
	}
	v, closer, err := l.db.Get(append(groupKey(pebblekit.LogDead, group), id...))
	if err == cpebble.ErrNotFound {
		return events.DeadLetter{}, rookery.E(op, rookery.NotFound, "no such dead letter")
	}
	if err != nil {
		return events.DeadLetter{}, rookery.E(op, rookery.Internal, err)
	}
	defer closer.Close()
	var d events.DeadLetter
	if err := json.Unmarshal(v, &d); err != nil {
		return events.DeadLetter{}, rookery.E(op, rookery.Internal, err)
	}
	return d, nil
}

// Replay implements events.Log.
func (l *Log) Replay(ctx context.Context, group, id string) error {
	const op rookery.Op = "embedded.Replay"
	if err := events.CheckGroup(op, group); err != nil {
		return err
	}
	qkey := append(groupKey(pebblekit.LogDead, group), id...)
	return l.write(op, func(b *cpebble.Batch) error {
		v, closer, err := l.db.Get(qkey)
		if err == cpebble.ErrNotFound {
			return rookery.E(op, rookery.NotFound, "no such dead letter")
		}
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		var d events.DeadLetter
		err = json.Unmarshal(v, &d)
		closer.Close()
		if err != nil {
			return rookery.E(op, rookery.Internal, err)
		}
		ev, _ := json.Marshal(d.Event)
		rkey := binary.BigEndian.AppendUint64(groupKey(pebblekit.LogReplayed, group), uint64(l.clock.Now().UnixNano()))
		if err := b.Set(append(rkey, id...), ev, nil); err != nil {
			return err
		}
		if g := l.groups[group]; g != nil {
			g.noReplays = false // l.write holds l.mu
		}
		return b.Delete(qkey, nil)
	})
}

// Drop implements events.Log.
func (l *Log) Drop(ctx context.Context, group, id string) error {
	const op rookery.Op = "embedded.Drop"
	if err := events.CheckGroup(op, group); err != nil {
		return err
	}
	qkey := append(groupKey(pebblekit.LogDead, group), id...)
	return l.write(op, func(b *cpebble.Batch) error {
		if _, closer, err := l.db.Get(qkey); err == cpebble.ErrNotFound {
			return rookery.E(op, rookery.NotFound, "no such dead letter")
		} else if err != nil {
			return rookery.E(op, rookery.Internal, err)
		} else {
			closer.Close()
		}
		return b.Delete(qkey, nil)
	})
}
