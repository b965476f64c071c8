package pebblestore

// The sweeper: it deletes the timelines that stopped existing, the entries past their TTL, and the
// post index's keys of posts past their TTL.

import (
	"bytes"
	"context"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/pebblekit"
)

func (s *Store) sweepLoop(every time.Duration) {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("sweeping home timelines", "err", err)
			}
		}
	}
}

// sweepPage is how many markers the sweeper reads at a time (it holds no iterator while it
// deletes).
const sweepPage = 1000

// Sweep deletes the timelines that stopped existing (their marker expired: nobody read them for
// InactiveAfter), marker and entries, the entries of the others that are past their TTL, and the
// post-index keys of posts past the TTL. It costs a seek per timeline, a read of the post index,
// and what it deletes.
func (s *Store) Sweep(ctx context.Context) error {
	const op rookery.Op = "pebblestore.Sweep"
	from := []byte{pebblekit.TimelineMarkers}
	for {
		if err := ctx.Err(); err != nil {
			return rookery.E(op, rookery.Unavailable, err)
		}
		users, err := s.markerPage(from)
		if err != nil {
			return internal(op, err)
		}
		for _, u := range users {
			if err := s.sweep(u); err != nil {
				return internal(op, err)
			}
		}
		if len(users) < sweepPage {
			break
		}
		from = append(markerKey(users[len(users)-1]), 0)
	}
	return internal(op, s.sweepIndex(ctx))
}

// sweepIndex deletes the post-index keys whose post is past the TTL (and so is every entry they
// name), a page of keys at a time.
func (s *Store) sweepIndex(ctx context.Context) error {
	cut := ms(s.cutoff())
	for from := []byte{pebblekit.TimelinePosts}; from != nil; {
		if err := ctx.Err(); err != nil {
			return err
		}
		expired, next, err := s.expiredHolders(from, cut)
		if err != nil {
			return err
		}
		if len(expired) > 0 {
			b := s.db.NewBatch()
			for _, k := range expired {
				_ = b.Delete(k, nil)
			}
			err = b.Commit(cpebble.NoSync)
			b.Close()
			if err != nil {
				return err
			}
		}
		from = next
	}
	return nil
}

// expiredHolders reads up to sweepPage post-index keys from key from on and returns those whose
// time is before cut, and the key to read on from (nil at the end).
func (s *Store) expiredHolders(from, cut []byte) (expired [][]byte, next []byte, err error) {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: from, UpperBound: []byte{pebblekit.TimelinePosts + 1}})
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n > sweepPage {
			return expired, bytes.Clone(it.Key()), nil
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, nil, err
		}
		if len(v) < 8 || bytes.Compare(v[:8], cut) < 0 {
			expired = append(expired, bytes.Clone(it.Key()))
		}
	}
	return expired, nil, it.Error()
}

// markerPage returns the users of up to sweepPage markers from key from on.
func (s *Store) markerPage(from []byte) ([]string, error) {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: from, UpperBound: []byte{pebblekit.TimelineMarkers + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var users []string
	for ok := it.First(); ok && len(users) < sweepPage; ok = it.Next() {
		users = append(users, string(it.Key()[1:]))
	}
	return users, it.Error()
}

// sweep deletes user's timeline if its marker expired, else its entries past their TTL.
func (s *Store) sweep(user string) error {
	defer s.locks.Lock(user)()
	v, err := s.marker(user)
	if err != nil || v == nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	gone := !s.live(v)
	if gone {
		_ = b.Delete(markerKey(user), nil)
		err = s.each(user, func(k, _ []byte) { _ = b.Delete(k, nil) })
	} else {
		err = s.expired(user, func(k []byte) { _ = b.Delete(k, nil) })
	}
	if err != nil || b.Empty() {
		return err
	}
	if err := s.commit(b, cpebble.NoSync, user); err != nil {
		return err
	}
	if gone {
		s.markers.set(user, 0)
	}
	return nil
}

// expired calls do with (a copy of) the key of each of user's entries past its TTL.
func (s *Store) expired(user string, do func(k []byte)) error {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: feedPrefix(user), UpperBound: entryKey(user, ms(s.cutoff()), "")})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		do(bytes.Clone(it.Key()))
	}
	return it.Error()
}
