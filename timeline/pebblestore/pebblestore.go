// Package pebblestore keeps home timelines in a Pebble engine of their own layout: the embedded
// default, in the table store's engine (its key spaces are disjoint from the store's and the event
// log's), so a timeline entry costs one short engine key instead of a table item with its index
// and TTL entries.
//
//	'h' user                          -> mark: be64(expiry, unix ms) [n floor build]
//	                                                             the timeline exists until then; n
//	                                                             is the floor's length (0: zero),
//	                                                             floor an entry key's be64(at) post,
//	                                                             build "" once complete (8 bytes
//	                                                             alone: complete, floor zero)
//	'f' user 0x00 be64(at) post       -> author                  an entry; at is the post's time in ms
//	'g' post 0x00 user 0x00 be64(h)   -> be64(at) users          timelines given the post (a push's
//	                                                             users, ascending: user is the first,
//	                                                             h a hash of them all)
//
// Entries sort oldest first (time, then post id), so a page reads backwards from its cursor.
//
// The post index is written once per push, not per entry, and never rewritten (the same users
// write the same key again; other users, another key): an entry that
// leaves a timeline (trims, RemoveAuthor, the sweeper) leaves its user in the list, and RemovePost,
// which deletes the entry key of every user listed, then deletes a key that is already gone. The
// sweeper deletes index keys once their post is past the TTL, which every entry of theirs is too.
//
// Push writes one batch for all its users (their markers from a cache of the markers this Store
// read and wrote, markers.go, and the others read with one iterator, in key order) without
// syncing it, then syncs the write-ahead log once: a fan-out of 10,000 timelines costs one
// sync. Every other write is synced as it commits. With Options.Unsynced no write is synced (the
// embedded event log's consumer offsets, written to the same engine after the writes they
// acknowledge, stand for them: see Unsynced).
//
// The cap is kept lazily on Push (a push trims a timeline on about one push in
// timeline.TrimEvery, decided by timeline.TrimDue) and exactly by Add and Merge. Entries past
// their TTL are never shown; trims and the sweeper remove them. A timeline unread for
// InactiveAfter stops existing at once (its marker has expired); the sweeper deletes what it held.
//
// Begin, Complete, Create, Merge, DropOlder, RemoveAuthor, trims and the sweeper take a lock on
// the user, so a Merge reads the floor and writes above it in one atomic step, and a trim cuts and
// raises the floor in one. Push takes no lock: an entry it adds below a floor raised meanwhile is
// never shown (Page reads the marker and the entries through one iterator, one view of the engine).
package pebblestore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/keylock"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/timeline"
)

// Options configure a Store.
type Options struct {
	timeline.Limits
	Clock rookery.Clock // nil means the system clock
	// SweepEvery is how often the sweeper deletes the timelines that stopped existing and the
	// entries past their TTL; 0 means an hour, and a negative value disables it (call Sweep).
	SweepEvery time.Duration
	Logger     *slog.Logger // the sweeper's errors; nil means none are logged
	// Unsynced leaves every write unsynced. Set it only when whatever relies on a write is itself
	// written later to the same engine: as rookery serve runs, where the timelines are written by
	// consumers of the embedded event log, which keeps its consumer offsets in the same engine and
	// writes an event's offset after the handler's writes. Recovery after a crash keeps a prefix of
	// the write-ahead log, so an offset that survived means the writes before it did; a write that
	// was lost takes its event's offset with it, and the event is delivered again. (The read
	// path's writes, a rebuilt timeline or a marker kept alive, are redone by the next read.)
	Unsynced bool
	// MarkerCache is how many timelines' markers the Store keeps in memory, so that a push reads
	// the engine only for followers it has not seen yet; 0 means DefaultMarkerCache, and a
	// negative value keeps none. The cache relies on this Store writing every marker of its
	// engine: open one Store per engine.
	MarkerCache int
	// HeadCache is how many timelines' newest entries the Store keeps in memory, so that a read of
	// a feed's first page does not seek the engine (heads.go); 0 means DefaultHeadCache, and a
	// negative value keeps none. Like MarkerCache, it relies on one Store per engine.
	HeadCache int
}

// Store is a timeline.Store on a Pebble engine.
type Store struct {
	db    *cpebble.DB
	cap   int
	ttl   time.Duration
	idle  time.Duration
	clock rookery.Clock
	sync  *cpebble.WriteOptions // cpebble.Sync, or NoSync with Options.Unsynced
	locks keylock.Set[string]
	log   *slog.Logger
	// markers caches marker values for Push (markers.go).
	markers *markerCache
	// heads caches the newest entries of timelines for Page (heads.go).
	heads *headCache

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ timeline.Store = (*Store)(nil)

// New returns a Store on db and starts its sweeper. db must stay open until Close returns.
func New(db *cpebble.DB, o Options) *Store {
	l := o.Limits.WithDefaults()
	if o.Clock == nil {
		o.Clock = rookery.SystemClock
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{db: db, cap: l.Cap, ttl: l.TTL, idle: l.InactiveAfter, clock: o.Clock, log: o.Logger, sync: cpebble.Sync,
		locks: keylock.Set[string]{Compare: strings.Compare}, stop: make(chan struct{}), done: make(chan struct{})}
	if o.Unsynced {
		s.sync = cpebble.NoSync
	}
	if o.MarkerCache == 0 {
		o.MarkerCache = DefaultMarkerCache
	}
	s.markers = newMarkerCache(o.MarkerCache)
	if err := s.loadMarkers(); err != nil {
		// Not fatal: the cache is then incomplete, and a push reads the markers it lacks.
		s.log.Error("timelines: loading the markers failed; pushes read them from the engine", "err", err)
	}
	if o.HeadCache == 0 {
		o.HeadCache = DefaultHeadCache
	}
	s.heads = newHeadCache(o.HeadCache)
	every := o.SweepEvery
	if every == 0 {
		every = time.Hour
	}
	if every < 0 {
		close(s.done)
		return s
	}
	go s.sweepLoop(every)
	return s
}

// loadMarkers loads every marker of the engine into the marker cache, if they fit: one scan of
// the markers' space when the Store opens instead of a seek per follower at each push until the
// cache has met them all.
func (s *Store) loadMarkers() error {
	it, err := s.db.NewIter(spaceOf(pebblekit.TimelineMarkers))
	if err != nil {
		return err
	}
	defer it.Close()
	valid := it.First()
	return s.markers.load(func() (string, int64, bool, error) {
		if !valid {
			return "", 0, false, it.Error()
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return "", 0, false, err
		}
		u, exp := string(it.Key()[1:]), expiry(v)
		valid = it.Next()
		return u, exp, true, nil
	})
}

// Forget tells the Store that user's marker is gone from the engine: for a test or tool that
// deleted it behind the Store's back (as the marker's expiry or a lost engine would). The Store
// drops the timeline's head and keeps "no marker" for the user.
func (s *Store) Forget(user string) {
	defer s.locks.Lock(user)()
	s.markers.set(user, 0)
	s.heads.drop(user)
}

// Close stops the sweeper. It does not close the engine.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

func checkUser(op rookery.Op, user string) error {
	if !rookery.ValidUserID(user) {
		return rookery.E(op, rookery.Invalid, "not a user id")
	}
	return nil
}

func checkPost(op rookery.Op, post string) error {
	if post == "" || len(post) > 1024 || strings.IndexByte(post, 0) >= 0 {
		return rookery.E(op, rookery.Invalid, "not a post id")
	}
	return nil
}

func internal(op rookery.Op, err error) error {
	if err == nil {
		return nil
	}
	return rookery.E(op, rookery.Internal, err)
}

// cutoff is the time below which entries are past their TTL.
func (s *Store) cutoff() time.Time { return s.clock.Now().Add(-s.ttl) }

// live reports whether a marker's value says the timeline exists now.
func (s *Store) live(v []byte) bool { return liveAt(v, s.clock.Now().UnixMilli()) }

// marker returns user's marker value, or nil if there is none.
func (s *Store) marker(user string) ([]byte, error) {
	v, closer, err := s.db.Get(markerKey(user))
	if err == cpebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// newExpiry is the expiry of a timeline read or created now.
func (s *Store) newExpiry() int64 { return s.clock.Now().Add(s.idle).UnixMilli() }

// Page implements timeline.Store.
func (s *Store) Page(ctx context.Context, user string, before timeline.Entry, limit int) (timeline.Page, error) {
	const op rookery.Op = "pebblestore.Page"
	if err := checkUser(op, user); err != nil {
		return timeline.Page{}, err
	}
	if limit < 1 || limit > 100 {
		return timeline.Page{}, rookery.E(op, rookery.Invalid, "limit must be 1 to 100")
	}
	if before.PostID != "" {
		if err := checkPost(op, before.PostID); err != nil {
			return timeline.Page{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return timeline.Page{}, rookery.E(op, rookery.Unavailable, err)
	}
	if before.PostID == "" {
		// The first page: from the timeline's head, kept (heads.go), or read and kept.
		h, epoch := s.heads.get(user)
		if h == nil {
			var err error
			if h, err = s.readHead(user, nil, max(limit, headEntries)); err != nil {
				return timeline.Page{}, internal(op, err)
			}
			s.heads.add(user, h, epoch)
		}
		p, ok, err := s.pageOf(user, h, before, limit)
		if ok || err != nil {
			return p, internal(op, err)
		}
	} else if h, _ := s.heads.get(user); h != nil {
		p, ok, err := s.pageOf(user, h, before, limit)
		if ok || err != nil {
			return p, internal(op, err)
		}
	}
	var upper []byte // the first page's, when its head ends before the page does: all
	if before.PostID != "" {
		upper = entryKey(user, ms(before.At), before.PostID)
	}
	h, err := s.readHead(user, upper, limit)
	if err != nil {
		return timeline.Page{}, internal(op, err)
	}
	p, _, err := s.pageOf(user, h, before, limit)
	return p, internal(op, err)
}

// readHead reads user's marker and up to n of the newest entries below upper (nil: all), stopping
// at the floor and the TTL's cutoff.
func (s *Store) readHead(user string, upper []byte, n int) (*head, error) {
	if s.markers.none(user) {
		// No timeline (most readers' first read, on a large graph): nothing to seek. A marker
		// committed since reads as if the read had come first (its commit drops the cached head).
		return &head{}, nil
	}
	// The marker through the same iterator as the entries: one view, so the floor and the entries
	// agree (a trim cuts entries and raises the floor in one batch). Bounded to the marker first,
	// then to the entries (SetBounds keeps the view): each seek loads only what its bounds overlap.
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: markerKey(user), UpperBound: append(markerKey(user), 0)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	h := &head{}
	// A prefix seek: the bloom filters pass over every file without the marker, so a reader
	// without a timeline (most readers' first read, on a large graph) costs no seek through them.
	if !it.SeekPrefixGE(markerKey(user)) || !bytes.Equal(it.Key(), markerKey(user)) {
		return h, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, err
	}
	h.marked, h.mark = true, parseMark(v)
	if h.mark.build != "" {
		return h, nil // being built: nothing to read
	}
	it.SetBounds(feedPrefix(user), feedEnd(user))
	if upper == nil {
		upper = feedEnd(user)
	}
	cut := s.cutoff()
	ok := it.SeekLT(upper)
	for ; ok && len(h.entries) < n; ok = it.Prev() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if h.mark.below(user, it.Key()) {
			break // so is every later one
		}
		e := parseEntry(user, it.Key(), v)
		if e.At.Before(cut) {
			break // every later entry is older still
		}
		h.entries = append(h.entries, headEntry{key: bytes.Clone(it.Key()), e: e})
	}
	h.all = len(h.entries) < n
	return h, it.Error()
}

// pageOf returns the page of user's timeline older than before that h shows; ok is false when h
// ends before the page does.
func (s *Store) pageOf(user string, h *head, before timeline.Entry, limit int) (p timeline.Page, ok bool, err error) {
	if !h.marked || h.mark.exp <= s.clock.Now().UnixMilli() || h.mark.build != "" {
		return timeline.Page{}, true, nil // missing, or being built
	}
	if h.mark.exp < s.clock.Now().Add(s.idle-min(time.Hour, s.idle/10)).UnixMilli() {
		if _, err := s.keepAlive(user); err != nil {
			return timeline.Page{}, true, err
		}
	}
	var upper []byte
	if before.PostID != "" {
		upper = entryKey(user, ms(before.At), before.PostID)
	}
	page := timeline.Page{Exists: true, Entries: make([]timeline.Entry, 0, min(limit, len(h.entries)))}
	cut := s.cutoff()
	for _, he := range h.entries {
		if upper != nil && bytes.Compare(he.key, upper) >= 0 {
			continue
		}
		if len(page.Entries) == limit || h.mark.below(user, he.key) || he.e.At.Before(cut) {
			return page, true, nil
		}
		page.Entries = append(page.Entries, he.e)
	}
	return page, len(page.Entries) == limit || h.all, nil
}

// keepAlive reports whether user's timeline exists, and pushes its marker's expiry InactiveAfter
// ahead when it has run down by a tenth of that (at most an hour): a write at most once an hour
// per reader.
func (s *Store) keepAlive(user string) (bool, error) {
	v, err := s.marker(user)
	if err != nil || !s.live(v) {
		return false, err
	}
	refresh := s.clock.Now().Add(s.idle - min(time.Hour, s.idle/10)).UnixMilli()
	if expiry(v) >= refresh {
		return true, nil
	}
	// Under the lock, so the sweeper cannot delete the timeline between the check and the write.
	defer s.locks.Lock(user)()
	if v, err = s.marker(user); err != nil || !s.live(v) {
		return false, err
	}
	m := parseMark(v)
	m.exp = s.newExpiry()
	err = s.db.Set(markerKey(user), m.value(), s.sync)
	s.heads.drop(user)
	if err != nil {
		return false, err
	}
	s.markers.set(user, m.exp)
	return true, nil
}

// Exists implements timeline.Store.
func (s *Store) Exists(ctx context.Context, user string) (bool, error) {
	const op rookery.Op = "pebblestore.Exists"
	if err := checkUser(op, user); err != nil {
		return false, err
	}
	v, err := s.marker(user)
	return err == nil && s.live(v), internal(op, err)
}

// Begin implements timeline.Store.
func (s *Store) Begin(ctx context.Context, user string) (string, error) {
	const op rookery.Op = "pebblestore.Begin"
	if err := checkUser(op, user); err != nil {
		return "", err
	}
	defer s.locks.Lock(user)()
	v, err := s.marker(user)
	if err != nil {
		return "", internal(op, err)
	}
	if s.live(v) {
		return parseMark(v).build, nil
	}
	m := mark{exp: s.newExpiry(), build: timeline.NewBuild()}
	return m.build, internal(op, s.reset(user, m, nil))
}

// reset replaces user's timeline (whatever an expired one left) with m and entries, trimmed to the
// cap (the caller holds the lock).
func (s *Store) reset(user string, m mark, entries []timeline.Entry) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.each(user, func(k, _ []byte) { _ = b.Delete(k, nil) }); err != nil {
		return err
	}
	_ = b.Set(markerKey(user), m.value(), nil)
	for _, e := range timeline.Newest(entries, s.cap+1) { // one more, so the trim raises the floor
		setEntries(b, []string{user}, e)
	}
	if err := s.commit(b, cpebble.NoSync, user); err != nil {
		return err
	}
	s.markers.set(user, m.exp)
	if len(entries) == 0 { // Begin's: the batch deleted every entry; nothing to trim
		return s.syncLog()
	}
	return s.trimOrSync(user)
}

// trimOrSync trims user's timeline and makes what was committed before durable (the caller holds
// the lock).
func (s *Store) trimOrSync(user string) error {
	if err := s.trimLocked(user, cpebble.NoSync); err != nil {
		return err
	}
	return s.syncLog()
}

// Complete implements timeline.Store.
func (s *Store) Complete(ctx context.Context, user, build string, entries []timeline.Entry, floor timeline.Entry) (bool, error) {
	const op rookery.Op = "pebblestore.Complete"
	if err := s.check(op, user, entries); err != nil {
		return false, err
	}
	if floor.PostID != "" {
		if err := checkPost(op, floor.PostID); err != nil {
			return false, err
		}
	}
	if build == "" {
		return false, rookery.E(op, rookery.Invalid, "no build")
	}
	defer s.locks.Lock(user)()
	v, err := s.marker(user)
	if err != nil || !s.live(v) || parseMark(v).build != build {
		return false, internal(op, err)
	}
	m := parseMark(v)
	m.build = ""
	m.raise(floorOf(floor))
	return true, internal(op, s.addLocked(user, m, entries))
}

// Create implements timeline.Store.
func (s *Store) Create(ctx context.Context, user string, entries []timeline.Entry) error {
	const op rookery.Op = "pebblestore.Create"
	if err := s.check(op, user, entries); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	return internal(op, s.reset(user, mark{exp: s.newExpiry()}, entries))
}

// Delete implements timeline.Store: the marker and the entries in one batch. The post index may
// still name the user; RemovePost then deletes entries that are not there, which is harmless.
func (s *Store) Delete(ctx context.Context, user string) error {
	const op rookery.Op = "pebblestore.Delete"
	if err := checkUser(op, user); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.each(user, func(k, _ []byte) { _ = b.Delete(k, nil) }); err != nil {
		return internal(op, err)
	}
	_ = b.Delete(markerKey(user), nil)
	if err := s.commit(b, s.sync, user); err != nil {
		return internal(op, err)
	}
	s.markers.set(user, 0) // no marker
	return nil
}

func (s *Store) check(op rookery.Op, user string, entries []timeline.Entry) error {
	if err := checkUser(op, user); err != nil {
		return err
	}
	for _, e := range entries {
		if err := checkPost(op, e.PostID); err != nil {
			return err
		}
	}
	return nil
}

// each calls do with (a copy of) the key and value of each of user's entries, oldest first.
func (s *Store) each(user string, do func(k, v []byte)) error {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: feedPrefix(user), UpperBound: feedEnd(user)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		do(bytes.Clone(it.Key()), bytes.Clone(v))
	}
	return it.Error()
}

// addLocked writes m as user's marker and the entries not below its floor, and trims the timeline
// to exactly the cap (the caller holds the lock and has checked that the timeline exists).
func (s *Store) addLocked(user string, m mark, entries []timeline.Entry) error {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(markerKey(user), m.value(), nil)
	for _, e := range timeline.Newest(entries, s.cap+1) {
		if !m.below(user, entryKey(user, ms(e.At), e.PostID)) {
			setEntries(b, []string{user}, e)
		}
	}
	if err := s.commit(b, cpebble.NoSync, user); err != nil {
		return err
	}
	return s.trimOrSync(user)
}

// Merge implements timeline.Store: under the user's lock, it reads the floor and adds the entries
// not below it.
func (s *Store) Merge(ctx context.Context, user string, entries []timeline.Entry) error {
	const op rookery.Op = "pebblestore.Merge"
	if err := s.check(op, user, entries); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	v, err := s.marker(user)
	if err != nil || !s.live(v) || len(entries) == 0 {
		return internal(op, err)
	}
	return internal(op, s.addLocked(user, parseMark(v), entries))
}

// DropOlder implements timeline.Store.
func (s *Store) DropOlder(ctx context.Context, user string, e timeline.Entry) error {
	const op rookery.Op = "pebblestore.DropOlder"
	if err := s.check(op, user, []timeline.Entry{e}); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.raiseFloor(b, user, floorOf(e)); err != nil || b.Empty() {
		return internal(op, err) // no timeline
	}
	bound := entryKey(user, ms(e.At), e.PostID)
	err := s.each(user, func(k, _ []byte) {
		if bytes.Compare(k, bound) < 0 {
			_ = b.Delete(k, nil)
		}
	})
	if err != nil {
		return internal(op, err)
	}
	return internal(op, s.commit(b, s.sync, user))
}

// deleteWhere deletes the entries of user's timeline that pick selects (the caller holds the lock).
func (s *Store) deleteWhere(user string, pick func(k, v []byte) bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	err := s.each(user, func(k, v []byte) {
		if pick(k, v) {
			_ = b.Delete(k, nil)
		}
	})
	if err != nil || b.Empty() {
		return err
	}
	return s.commit(b, s.sync, user)
}

// Remove implements timeline.Store: it reads the timeline for the post's entry (at most the cap,
// and what trims have not caught up with).
func (s *Store) Remove(ctx context.Context, user, postID string) error {
	const op rookery.Op = "pebblestore.Remove"
	if err := checkUser(op, user); err != nil {
		return err
	}
	if err := checkPost(op, postID); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	return internal(op, s.deleteWhere(user, func(k, _ []byte) bool { return string(k[len(user)+10:]) == postID }))
}

// RemoveAuthor implements timeline.Store: it reads the timeline (at most the cap, and what trims
// have not caught up with) and deletes the author's entries.
func (s *Store) RemoveAuthor(ctx context.Context, user, author string) error {
	const op rookery.Op = "pebblestore.RemoveAuthor"
	if err := checkUser(op, user); err != nil {
		return err
	}
	defer s.locks.Lock(user)()
	return internal(op, s.deleteWhere(user, func(_, v []byte) bool { return string(v) == author }))
}

// RemovePost implements timeline.Store: it reads the post's index keys and deletes the entry of
// every user they list, and the keys, in batches of about removeBatch deletes, then syncs once:
// O(copies the post was given).
func (s *Store) RemovePost(ctx context.Context, postID string) error {
	const op rookery.Op = "pebblestore.RemovePost"
	if err := checkPost(op, postID); err != nil {
		return err
	}
	prefix := append(append([]byte{pebblekit.TimelinePosts}, postID...), 0)
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: prefix, UpperBound: append(append([]byte{pebblekit.TimelinePosts}, postID...), 1)})
	if err != nil {
		return internal(op, err)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	var users []string // whose entries b deletes
	flushed := false   // a batch was committed unsynced
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return rookery.E(op, rookery.Unavailable, err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return internal(op, err)
		}
		if !eachHolder(it.Key(), v, func(user string) {
			_ = b.Delete(entryKey(user, v[:8], postID), nil)
			users = append(users, user)
		}) {
			return rookery.E(op, rookery.Internal, "a malformed post index key")
		}
		_ = b.Delete(it.Key(), nil)
		if b.Count() >= removeBatch {
			if err := s.commit(b, cpebble.NoSync, users...); err != nil {
				return internal(op, err)
			}
			flushed, users = true, users[:0]
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return internal(op, err)
	}
	switch {
	case !b.Empty():
		return internal(op, s.commit(b, s.sync, users...)) // and every batch before it
	case flushed:
		return internal(op, s.syncLog())
	}
	return nil // no timeline held the post
}

const removeBatch = 1000

// commit commits b, which writes the timelines of users, and drops their heads (heads.go): after
// the commit, so that a head read before it is not kept; also when the commit failed, as it may
// have written.
func (s *Store) commit(b *cpebble.Batch, sync *cpebble.WriteOptions, users ...string) error {
	err := b.Commit(sync)
	s.heads.drop(users...)
	return err
}

// syncLog syncs the write-ahead log, making every write committed before it durable (unless the
// store is Unsynced).
func (s *Store) syncLog() error {
	if s.sync == cpebble.NoSync {
		return nil
	}
	return s.db.LogData(nil, cpebble.Sync)
}
