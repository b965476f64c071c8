// Package tablestore keeps home timelines in the table (seed 003/004 FeedItem partitions), so they
// live in Pebble or DynamoDB like everything else.
//
//	marker   FEED#<user>  ~                      ttl  (the timeline exists; it expires when unread),
//	                                             floor (an entry's sort key; absent: zero),
//	                                             build (absent once complete)
//	entry    FEED#<user>  <13-digit ms>#<post>   post_id, author_id, at, ttl;
//	                                             GSI4 POST#<post> / FEED#<user>  (timelines holding a post)
//
// Entries sort by time then post id, so a descending query is the timeline newest first. The
// marker sorts after every entry ('~' > '9'), so the first page's query reads it with the entries.
// Reading a timeline pushes its marker's expiry InactiveAfter ahead (at most once an hour); a
// timeline nobody reads loses its marker, and with it its existence. RemovePost queries GSI4 for the
// copies of a post and deletes them: O(copies), never a scan. Trimming to the cap on Push is
// amortized: a push trims a timeline with probability 1/timeline.TrimEvery (timeline.TrimDue);
// Complete and Merge trim at once. A trim raises the floor before it deletes, so no reader sees the
// cut without the floor. Pushes and merges read no floor atomically with their writes (DynamoDB
// has no such read): an entry written below a floor raised meanwhile is never shown.
package tablestore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Options configure a Store.
type Options struct {
	timeline.Limits
	Clock rookery.Clock // nil means the system clock
}

// Store is a timeline.Store on a table.
type Store struct {
	t     table.Table
	cap   int
	ttl   time.Duration
	idle  time.Duration
	clock rookery.Clock
}

var _ timeline.Store = (*Store)(nil)

// New returns a Store on t, or an error if t's schema lacks Index (a query of it says so; a table
// that does not answer yet is no error: the server starts unready, and the store answers later).
func New(ctx context.Context, t table.Table, o Options) (*Store, error) {
	l := o.Limits.WithDefaults()
	if o.Clock == nil {
		o.Clock = rookery.SystemClock
	}
	_, err := t.Query(ctx, table.Query{Index: Index.Name, PK: postPK("-"), Limit: 1, KeysOnly: true})
	if rookery.IsKind(err, rookery.Invalid) {
		return nil, fmt.Errorf("table-backed timelines need the index %s (%s/%s) in the table's schema: %w", Index.Name, Index.PK, Index.SK, err)
	}
	return &Store{t: t, cap: l.Cap, ttl: l.TTL, idle: l.InactiveAfter, clock: o.Clock}, nil
}

const marker = "~"

func feedPK(user string) string { return "FEED#" + user }

func postPK(post string) string { return "POST#" + post }

// Index is the secondary index the store needs, of the timelines that hold a post: the table's
// schema must have it (app.Schema does), and New checks that it does.
var Index = table.Index{Name: "GSI4", PK: "GSI4PK", SK: "GSI4SK"}

func entrySK(e timeline.Entry) string { return fmt.Sprintf("%013d#%s", e.At.UnixMilli(), e.PostID) }

// entryItem is user's entry for e: a pure function of its key (the post fixes its author and time),
// so it is written as an immutable put, without reading what is there (a redelivered push).
func (s *Store) entryItem(user string, e timeline.Entry) table.Item {
	return table.Item{
		table.PK: feedPK(user), table.SK: entrySK(e), "post_id": e.PostID, "author_id": e.AuthorID,
		"at": e.At.UnixMilli(), table.TTL: e.At.Add(s.ttl).Unix(),
		Index.PK: postPK(e.PostID), Index.SK: feedPK(user),
	}
}

func entryOf(it table.Item) timeline.Entry {
	return timeline.Entry{PostID: it.String("post_id"), AuthorID: it.String("author_id"), At: time.UnixMilli(it.Int("at")).UTC()}
}

// markerItem is user's marker, expiring InactiveAfter from now, being built by build ("": complete).
func (s *Store) markerItem(user, build string) table.Item {
	it := table.Item{table.PK: feedPK(user), table.SK: marker, table.TTL: s.clock.Now().Add(s.idle).Unix()}
	if build != "" {
		it["build"] = build
	}
	return it
}

func markerKey(user string) table.Key { return table.Key{PK: feedPK(user), SK: marker} }

// floorSK is floor as a sort key ("" for zero): entries whose sort key is less are below it.
func floorSK(floor timeline.Entry) string {
	if floor.PostID == "" {
		return ""
	}
	return entrySK(floor)
}

// raiseFloor raises the floor of user's timeline to sk, if it exists and its floor is lower.
func (s *Store) raiseFloor(ctx context.Context, user, sk string) error {
	for {
		m, err := s.t.Get(ctx, markerKey(user))
		if rookery.IsKind(err, rookery.NotFound) {
			return nil
		} else if err != nil {
			return err
		}
		cur := m.String("floor")
		if sk == "" || cur >= sk {
			return nil
		}
		same := table.Compare("floor", table.OpEq, cur)
		if cur == "" {
			same = table.NotExists("floor")
		}
		_, err = s.t.Update(ctx, markerKey(user), table.Update{Set: map[string]any{"floor": sk}}, table.Exists(table.PK), same)
		if !rookery.IsKind(err, rookery.Conflict) {
			return err
		}
		// The marker changed since it was read (another floor, a new build): read it again.
	}
}

func checkUser(op rookery.Op, user string) error {
	if !rookery.ValidUserID(user) {
		return rookery.E(op, rookery.Invalid, "not a user id")
	}
	return nil
}

// Push implements timeline.Store. The users are taken 100 at a time (a batch read of their markers,
// one batch write of entries), the batches concurrently, so that their synced commits share a sync.
func (s *Store) Push(ctx context.Context, users []string, e timeline.Entry) error {
	const op rookery.Op = "tablestore.Push"
	for _, u := range users {
		if err := checkUser(op, u); err != nil {
			return err
		}
	}
	return concurrently(slices.Collect(slices.Chunk(users, table.MaxBatchGet)), func(chunk []string) error {
		keys := make([]table.Key, len(chunk))
		for i, u := range chunk {
			keys[i] = markerKey(u)
		}
		markers, err := s.t.BatchGet(ctx, keys)
		if err != nil {
			return err
		}
		var writes []table.Write
		var trim []string
		for i, m := range markers {
			if m == nil {
				continue // no timeline: it is built on its next read
			}
			writes = append(writes, table.ImmutablePutWrite(s.entryItem(chunk[i], e)))
			if timeline.TrimDue(chunk[i], e.PostID) {
				trim = append(trim, chunk[i])
			}
		}
		if len(writes) > 0 {
			if err := s.t.BatchWrite(ctx, writes); err != nil {
				return err
			}
		}
		for _, u := range trim {
			if err := s.trim(ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// concurrently runs do for each part, all at once, and returns the first error.
func concurrently[T any](parts []T, do func(T) error) error {
	if len(parts) == 1 {
		return do(parts[0])
	}
	errs := make(chan error, len(parts))
	for _, p := range parts {
		go func() { errs <- do(p) }()
	}
	var first error
	for range parts {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// trim deletes the entries of user's timeline past the cap, having raised its floor to the newest
// of them.
func (s *Store) trim(ctx context.Context, user string) error {
	seen := 0
	var raised error
	err := s.deleteWhere(ctx, s.entries(user, true), func(it table.Item) bool {
		if seen++; seen == s.cap+1 {
			raised = s.raiseFloor(ctx, user, it.String(table.SK))
		}
		return seen > s.cap && raised == nil
	})
	if raised != nil {
		return raised
	}
	return err
}

// entries is the query of user's timeline entries (the marker excluded), newest first if desc.
func (s *Store) entries(user string, desc bool) table.Query {
	return table.Query{PK: feedPK(user), SK: table.SKCond{Op: table.SKLt, Value: marker}, Desc: desc, Limit: table.MaxQueryLimit}
}

// deleteWhere pages through q and deletes every item pick selects, in transactions of up to
// MaxTransact deletes.
func (s *Store) deleteWhere(ctx context.Context, q table.Query, pick func(table.Item) bool) error {
	return table.EachPage(ctx, s.t, q, func(items []table.Item) error {
		var dels []table.Write
		for _, it := range items {
			if pick(it) {
				dels = append(dels, table.ImmutableDeleteWrite(it))
			}
		}
		return s.write(ctx, dels)
	})
}

// Page implements timeline.Store. The first page's query reads the marker with the entries; a later
// page reads the marker with a Get.
func (s *Store) Page(ctx context.Context, user string, before timeline.Entry, limit int) (timeline.Page, error) {
	const op rookery.Op = "tablestore.Page"
	if err := checkUser(op, user); err != nil {
		return timeline.Page{}, err
	}
	if limit < 1 || limit > 100 {
		return timeline.Page{}, rookery.E(op, rookery.Invalid, "limit must be 1 to 100")
	}
	var mark table.Item
	q := table.Query{PK: feedPK(user), SK: table.SKCond{Op: table.SKLe, Value: marker}, Desc: true, Limit: limit + 1}
	if before.PostID != "" {
		q = table.Query{PK: feedPK(user), SK: table.SKCond{Op: table.SKLt, Value: entrySK(before)}, Desc: true, Limit: limit}
		m, err := s.t.Get(ctx, markerKey(user))
		if rookery.IsKind(err, rookery.NotFound) {
			return timeline.Page{}, nil
		} else if err != nil {
			return timeline.Page{}, err
		}
		mark = m
	}
	p, err := s.t.Query(ctx, q)
	if err != nil {
		return timeline.Page{}, err
	}
	items := p.Items
	if mark == nil {
		if len(items) == 0 || items[0].String(table.SK) != marker {
			return timeline.Page{}, nil // no marker: the timeline does not exist
		}
		mark, items = items[0], items[1:]
	}
	if mark.String("build") != "" {
		return timeline.Page{}, nil // being built: it reads as missing
	}
	// Keep the timeline active: push the marker's expiry ahead, at most once an hour.
	if mark.Int(table.TTL) < s.clock.Now().Add(s.idle-min(time.Hour, s.idle/10)).Unix() {
		_, err := s.t.Update(ctx, markerKey(user), table.Update{Set: map[string]any{table.TTL: s.clock.Now().Add(s.idle).Unix()}}, table.Exists(table.PK))
		if err != nil && !rookery.IsKind(err, rookery.Conflict) {
			return timeline.Page{}, err
		}
	}
	page := timeline.Page{Exists: true}
	floor := mark.String("floor")
	for _, it := range items {
		if it.String(table.SK) < floor {
			break // so is every later one
		}
		page.Entries = append(page.Entries, entryOf(it))
	}
	return page, nil
}

// Exists implements timeline.Store.
func (s *Store) Exists(ctx context.Context, user string) (bool, error) {
	if err := checkUser("tablestore.Exists", user); err != nil {
		return false, err
	}
	_, err := s.t.Get(ctx, markerKey(user))
	if rookery.IsKind(err, rookery.NotFound) {
		return false, nil
	}
	return err == nil, err
}

// Begin implements timeline.Store: a conditional put of the marker, so that of two processes
// beginning at once one writes it and the other takes its build.
func (s *Store) Begin(ctx context.Context, user string) (string, error) {
	const op rookery.Op = "tablestore.Begin"
	if err := checkUser(op, user); err != nil {
		return "", err
	}
	for {
		m, err := s.t.Get(ctx, markerKey(user))
		if err == nil {
			return m.String("build"), nil
		} else if !rookery.IsKind(err, rookery.NotFound) {
			return "", err
		}
		// What an expired timeline left goes first: it says nothing about the new one.
		if err := s.deleteWhere(ctx, s.entries(user, false), func(table.Item) bool { return true }); err != nil {
			return "", err
		}
		build := timeline.NewBuild()
		err = s.t.Put(ctx, s.markerItem(user, build), table.NotExists(table.PK))
		if err == nil {
			return build, nil
		} else if !rookery.IsKind(err, rookery.Conflict) {
			return "", err
		}
	}
}

// Complete implements timeline.Store: it raises the floor, writes the entries above it, then marks
// the timeline complete under a condition on the build.
func (s *Store) Complete(ctx context.Context, user, build string, entries []timeline.Entry, floor timeline.Entry) (bool, error) {
	const op rookery.Op = "tablestore.Complete"
	if err := checkUser(op, user); err != nil {
		return false, err
	}
	if build == "" {
		return false, rookery.E(op, rookery.Invalid, "no build")
	}
	m, err := s.t.Get(ctx, markerKey(user))
	if rookery.IsKind(err, rookery.NotFound) || err == nil && m.String("build") != build {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := s.raiseFloor(ctx, user, floorSK(floor)); err != nil {
		return false, err
	}
	if err := s.writeAbove(ctx, user, max(m.String("floor"), floorSK(floor)), entries); err != nil {
		return false, err
	}
	_, err = s.t.Update(ctx, markerKey(user), table.Update{Remove: []string{"build"}}, table.Compare("build", table.OpEq, build))
	if rookery.IsKind(err, rookery.Conflict) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, s.trim(ctx, user)
}

// writeAbove writes user's entries whose sort key is not below floor.
func (s *Store) writeAbove(ctx context.Context, user, floor string, entries []timeline.Entry) error {
	var writes []table.Write
	for _, e := range timeline.Newest(entries, s.cap+1) {
		if entrySK(e) >= floor {
			writes = append(writes, table.ImmutablePutWrite(s.entryItem(user, e)))
		}
	}
	return s.write(ctx, writes)
}

// Create implements timeline.Store: it deletes what the timeline held, then writes the marker and
// the entries, and trims.
func (s *Store) Create(ctx context.Context, user string, entries []timeline.Entry) error {
	const op rookery.Op = "tablestore.Create"
	if err := checkUser(op, user); err != nil {
		return err
	}
	if err := s.deleteWhere(ctx, s.entries(user, false), func(table.Item) bool { return true }); err != nil {
		return err
	}
	if err := s.t.Put(ctx, s.markerItem(user, "")); err != nil {
		return err
	}
	if err := s.writeAbove(ctx, user, "", entries); err != nil {
		return err
	}
	return s.trim(ctx, user)
}

// Delete implements timeline.Store: the marker first, so that pushes stop reaching the timeline,
// then its entries (with their post-index entries).
func (s *Store) Delete(ctx context.Context, user string) error {
	const op rookery.Op = "tablestore.Delete"
	if err := checkUser(op, user); err != nil {
		return err
	}
	if err := s.t.Delete(ctx, markerKey(user)); err != nil {
		return err
	}
	return s.deleteWhere(ctx, s.entries(user, false), func(table.Item) bool { return true })
}

// write commits writes (entry puts and deletes: each stands alone and may be repeated) in
// batches of up to MaxTransact, concurrently. Batches, not transactions: on DynamoDB an entry then
// costs half the write units; no invariant of a timeline needs its entries written together (the
// floor is raised before trims delete, and a build is published by its marker, after its entries).
func (s *Store) write(ctx context.Context, writes []table.Write) error {
	if len(writes) == 0 {
		return nil
	}
	return concurrently(slices.Collect(slices.Chunk(writes, table.MaxTransact)), func(ws []table.Write) error {
		return s.t.BatchWrite(ctx, ws)
	})
}

// Merge implements timeline.Store: it reads the floor and writes the entries not below it (an
// entry left below a floor a concurrent trim raised is never shown), then trims.
func (s *Store) Merge(ctx context.Context, user string, entries []timeline.Entry) error {
	const op rookery.Op = "tablestore.Merge"
	if err := checkUser(op, user); err != nil {
		return err
	}
	m, err := s.t.Get(ctx, markerKey(user))
	if rookery.IsKind(err, rookery.NotFound) || err == nil && len(entries) == 0 {
		return nil
	} else if err != nil {
		return err
	}
	if err := s.writeAbove(ctx, user, m.String("floor"), entries); err != nil {
		return err
	}
	return s.trim(ctx, user)
}

// DropOlder implements timeline.Store.
func (s *Store) DropOlder(ctx context.Context, user string, e timeline.Entry) error {
	if err := checkUser("tablestore.DropOlder", user); err != nil {
		return err
	}
	if err := s.raiseFloor(ctx, user, floorSK(e)); err != nil {
		return err
	}
	q := table.Query{PK: feedPK(user), SK: table.SKCond{Op: table.SKLt, Value: entrySK(e)}, Limit: table.MaxQueryLimit}
	return s.deleteWhere(ctx, q, func(table.Item) bool { return true })
}

// Remove implements timeline.Store: it finds the entry through the post index.
func (s *Store) Remove(ctx context.Context, user, postID string) error {
	if err := checkUser("tablestore.Remove", user); err != nil {
		return err
	}
	return s.removeCopies(ctx, postID, func(u string) bool { return u == user })
}

// RemovePost implements timeline.Store.
func (s *Store) RemovePost(ctx context.Context, postID string) error {
	return s.removeCopies(ctx, postID, func(string) bool { return true })
}

// removeCopies deletes the copies of post in the timelines of the users keep selects, found
// through GSI4 (eventually consistent on DynamoDB: a copy written in the last instant may be
// missed, and the read path hides deleted posts regardless).
func (s *Store) removeCopies(ctx context.Context, postID string, keep func(user string) bool) error {
	if postID == "" || strings.ContainsAny(postID, "#") {
		return rookery.E(rookery.Op("tablestore.Remove"), rookery.Invalid, "not a post id")
	}
	q := table.Query{Index: Index.Name, PK: postPK(postID), Limit: table.MaxQueryLimit}
	return s.deleteWhere(ctx, q, func(it table.Item) bool { return keep(strings.TrimPrefix(it.String(table.PK), "FEED#")) })
}

// RemoveAuthor implements timeline.Store: it reads the timeline (at most the cap, and what
// trimming has not caught up with) and deletes the author's entries.
func (s *Store) RemoveAuthor(ctx context.Context, user, author string) error {
	if err := checkUser("tablestore.RemoveAuthor", user); err != nil {
		return err
	}
	return s.deleteWhere(ctx, s.entries(user, false), func(it table.Item) bool { return it.String("author_id") == author })
}
