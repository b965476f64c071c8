package embedded

import (
	"context"
	"encoding/binary"
	"log/slog"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/pebblekit"
)

// Retention. An event is deleted once it is older than Retain and every group that has subscribed
// in this process or persisted an offset has acked it; the last event of a partition is always
// kept, so that Open finds the partition's next offset. A group that has never subscribed does not
// hold events, and starts at the oldest event kept (a consumer added to the application later sees
// what is left). A group that is gone for good but left an offset holds events for as long as its
// offset stays.
//
// Trimming first moves each partition's first offset up under Log.mu, so that no group created
// from then on reads below it, then deletes: the events by a range deletion, the de-duplication
// keys of those that have one (appended events, not staged ones) one by one (an event appended
// again after its trim, by a relay that crashed long before, is appended anew: delivered again,
// which at-least-once allows).

func (l *Log) trimLoop(every time.Duration, log *slog.Logger) {
	l.every(every, func() {
		if _, err := l.Trim(context.Background()); err != nil {
			log.Error("event log: deleting events past their retention failed", "err", err)
		}
	})
}

// trimScan is how many events of a partition one round of Trim looks at.
const trimScan = 4096

// Trim deletes the events past retention (see above) and returns how many it deleted.
func (l *Log) Trim(ctx context.Context) (int, error) {
	const op rookery.Op = "embedded.Trim"
	if l.retain < 0 {
		return 0, nil
	}
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	total := 0
	for {
		n, err := l.trimRound()
		total += n
		if err != nil {
			return total, rookery.E(op, rookery.Internal, err)
		}
		if n == 0 {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, rookery.E(op, rookery.Unavailable, err)
		}
	}
}

// trimRound deletes up to trimScan events per partition.
func (l *Log) trimRound() (int, error) {
	l.mu.Lock()
	from := append([]uint64(nil), l.first...)
	l.mu.Unlock()
	// Without the lock: how far each partition's events are old enough, and their ids.
	old := l.clock.Now().Add(-l.retain).UnixNano()
	upTo := make([]uint64, l.parts)
	ids := make([][]string, l.parts)
	for p := range l.parts {
		upTo[p] = from[p]
		iter, err := l.db.NewIter(&cpebble.IterOptions{LowerBound: eventKey(p, from[p]), UpperBound: eventKey(p+1, 0)})
		if err != nil {
			return 0, err
		}
		for ok := iter.First(); ok && len(ids[p]) < trimScan; ok = iter.Next() {
			st, err := decodeStored(iter.Value())
			if err != nil {
				iter.Close()
				return 0, err
			}
			if st.AppendedAt > old {
				break
			}
			id := st.Event.ID
			if !st.Dedup {
				id = "" // staged: no de-duplication key
			}
			ids[p] = append(ids[p], id)
			upTo[p] = binary.BigEndian.Uint64(iter.Key()[3:]) + 1
		}
		if err := iter.Close(); err != nil {
			return 0, err
		}
	}
	persisted, err := l.persistedOffsets()
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, nil
	}
	cut := make([]uint64, l.parts)
	for p := range l.parts {
		cut[p] = upTo[p]
		if l.next[p] > 0 {
			cut[p] = min(cut[p], l.next[p]-1) // keep the partition's last event
		}
		// A group subscribed in this process counts with its offsets in memory (ahead of what
		// it has written), any other with what it wrote.
		for _, g := range l.groups {
			cut[p] = min(cut[p], g.committed[p])
		}
		for name, offs := range persisted {
			if l.groups[name] == nil {
				cut[p] = min(cut[p], offs[p])
			}
		}
		cut[p] = max(cut[p], l.first[p])
		l.first[p] = cut[p]
	}
	l.mu.Unlock()
	b := l.db.NewBatch()
	defer b.Close()
	n := 0
	for p := range l.parts {
		if cut[p] <= from[p] {
			continue
		}
		if err := b.DeleteRange(eventKey(p, from[p]), eventKey(p, cut[p]), nil); err != nil {
			return 0, err
		}
		for _, id := range ids[p][:cut[p]-from[p]] {
			if id == "" {
				continue
			}
			if err := b.Delete(dedupKey(id), nil); err != nil {
				return 0, err
			}
		}
		n += int(cut[p] - from[p])
	}
	if n == 0 {
		return 0, nil
	}
	return n, b.Commit(cpebble.NoSync)
}

// persistedOffsets returns the offsets every group has written, by group and partition (0 where
// a group wrote none).
func (l *Log) persistedOffsets() (map[string][]uint64, error) {
	out := map[string][]uint64{}
	iter, err := l.db.NewIter(iterOver(pebblekit.LogOffsets))
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key() // 'o' group 0x00 be16(partition)
		if len(k) < 4 || k[len(k)-3] != 0 || len(iter.Value()) != 8 {
			continue
		}
		name, p := string(k[1:len(k)-3]), int(binary.BigEndian.Uint16(k[len(k)-2:]))
		if out[name] == nil {
			out[name] = make([]uint64, l.parts)
		}
		if p < l.parts {
			out[name][p] = binary.BigEndian.Uint64(iter.Value())
		}
	}
	return out, iter.Error()
}
