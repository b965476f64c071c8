package pebblestore

// Push: one batch for all of a page of followers, the trims it is due, and the floor they raise.

import (
	"bytes"
	"context"
	"slices"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/timeline"
)

// setEntries adds to b the writes of entry e in the timelines of users (ascending, at least one):
// an entry key each, and one post-index key listing them.
func setEntries(b *cpebble.Batch, users []string, e timeline.Entry) {
	at, author := ms(e.At), []byte(e.AuthorID)
	for _, u := range users {
		_ = b.Set(entryKey(u, at, e.PostID), author, nil)
	}
	_ = b.Set(holderKey(e.PostID, users), holders(at, users), nil)
}

// Push implements timeline.Store.
func (s *Store) Push(ctx context.Context, users []string, e timeline.Entry) error {
	const op rookery.Op = "pebblestore.Push"
	for _, u := range users {
		if err := checkUser(op, u); err != nil {
			return err
		}
	}
	if err := checkPost(op, e.PostID); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return rookery.E(op, rookery.Unavailable, err)
	}
	if len(users) == 0 {
		return nil
	}
	users = sortedSet(users) // so are their markers and entries
	exp := make([]int64, len(users))
	if err := s.expiries(users, exp); err != nil {
		return internal(op, err)
	}
	now := s.clock.Now().UnixMilli()
	var live, trim []string
	for i, u := range users {
		if exp[i] > now {
			live = append(live, u)
			if timeline.TrimDue(u, e.PostID) {
				trim = append(trim, u)
			}
		}
	}
	if len(live) == 0 {
		return nil // none of the timelines exists
	}
	b := s.db.NewBatch()
	defer b.Close()
	setEntries(b, live, e)
	others := s.heads.pushStart(live)
	if err := b.Commit(cpebble.NoSync); err != nil {
		s.heads.drop(live...) // it may have written
		return internal(op, err)
	}
	s.heads.pushed(live, others, e)
	for _, u := range trim {
		if err := s.trim(u, cpebble.NoSync); err != nil {
			return internal(op, err)
		}
	}
	// One sync makes the whole push durable: the write-ahead log is a sequence.
	return internal(op, s.syncLog())
}

// sortedSet returns users in ascending order without repeats, in a slice of its own. Fan-out's
// follower pages come in order already: they are only checked.
func sortedSet(users []string) []string {
	users = slices.Clone(users)
	if !slices.IsSorted(users) {
		slices.Sort(users)
	}
	return slices.Compact(users)
}

// expiries sets exp[i] to the expiry of users[i]'s marker (0: none), for users in ascending order:
// from the marker cache, and from the engine, with one iterator, for the users it does not hold.
func (s *Store) expiries(users []string, exp []int64) error {
	missing, gen := s.markers.lookup(users, exp)
	if len(missing) == 0 {
		return nil
	}
	it, err := s.db.NewIter(spaceOf(pebblekit.TimelineMarkers))
	if err != nil {
		return err
	}
	defer it.Close()
	read, vals := make([]string, len(missing)), make([]int64, len(missing))
	for n, i := range missing {
		read[n] = users[i]
		if !it.SeekPrefixGE(markerKey(users[i])) {
			if err := it.Error(); err != nil {
				return err
			}
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		vals[n] = expiry(v)
		exp[i] = vals[n]
	}
	s.markers.fill(gen, read, vals)
	return nil
}

// trim deletes user's entries past the cap and past their TTL.
func (s *Store) trim(user string, sync *cpebble.WriteOptions) error {
	defer s.locks.Lock(user)()
	return s.trimLocked(user, sync)
}

func (s *Store) trimLocked(user string, sync *cpebble.WriteOptions) error {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: feedPrefix(user), UpperBound: feedEnd(user)})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	cut := ms(s.cutoff())
	var newestCut []byte // the newest entry the cap cuts: the floor rises to it
	n := 0
	for ok := it.Last(); ok; ok = it.Prev() {
		k := it.Key()
		if n++; n == s.cap+1 {
			newestCut = bytes.Clone(k[len(user)+2:])
		}
		if n > s.cap || bytes.Compare(k[len(user)+2:len(user)+10], cut) < 0 {
			_ = b.Delete(bytes.Clone(k), nil)
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	if newestCut != nil {
		if err := s.raiseFloor(b, user, newestCut); err != nil {
			return err
		}
	}
	return s.commit(b, sync, user)
}

// raiseFloor adds to b the write raising the floor of user's timeline to f, if it exists (the
// caller holds the lock).
func (s *Store) raiseFloor(b *cpebble.Batch, user string, f []byte) error {
	v, err := s.marker(user)
	if err != nil || !s.live(v) {
		return err
	}
	m := parseMark(v)
	m.raise(f)
	return b.Set(markerKey(user), m.value(), nil)
}
