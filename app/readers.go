package app

import (
	"context"
	"maps"
	"slices"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// readerSets are a reader's edges as the read path needs them (view): whom they follow, whom they
// block or are blocked by (either way hides), whom they mute. Kept ones are shared by readers, who
// must not change them. A reader with too many edges to keep is kept as tooBig, so that their
// reads do not read them again only to drop them.
type readerSets struct {
	follows, blocked, muted map[string]bool
	tooBig                  bool
}

func (s readerSets) size() int { return 1 + len(s.follows) + len(s.blocked) + len(s.muted) }

// readerEdges keeps readers' sets in memory (keptByUser: only in the store's only writer, and only
// where index queries are exact, since a reader's blockers are read from an index). Without them a
// feed page read each of its authors' edges to the reader, four keys an author, or queried each
// kind: a third of a read's CPU. Every write of a follow, block or mute changes both of its users
// (change(from), change(to)).
type readerEdges = keptByUser[readerSets]

// readerEdgesMax is the most edges of one kind a reader's sets are kept with; a reader with more is
// read with queries, as without the cache (marked tooBig until their edges change).
const readerEdgesMax = 5_000

// edgeChange marks a change of the edge from -> to (a follow, block or mute) as under way for the
// kept sets of both, and for to's blockers (a follow or mute drops them too: reading them again is
// one index range), until the returned func is called.
func (a *App) edgeChange(from, to string) (done func()) {
	d1, d2, d3 := a.readers.change(from), a.readers.change(to), a.blockers.change(to)
	return func() { d1(); d2(); d3() }
}

// readerSetsOf reads reader's sets whole and keeps them (or that they are too big).
func (a *App) readerSetsOf(ctx context.Context, reader string) (readerSets, bool, error) {
	epoch, ok := a.readers.begin(reader)
	if !ok {
		return readerSets{}, false, nil
	}
	s := readerSets{follows: map[string]bool{}, blocked: map[string]bool{}, muted: map[string]bool{}}
	for _, kind := range []struct {
		q     table.Query
		other func(table.Key) string
		set   map[string]bool
	}{
		{table.Query{PK: followKey(reader, "").PK}, edgeTo, s.follows},
		{table.Query{PK: blockKey(reader, "").PK}, edgeTo, s.blocked},
		{table.Query{Index: gsi3.Name, PK: blockedByPK(reader)}, edgeFrom, s.blocked},
		{table.Query{PK: muteKey(reader, "").PK}, edgeTo, s.muted},
	} {
		if complete, err := a.readKeySet(ctx, kind.q, kind.other, kind.set); err != nil || !complete {
			if err == nil {
				a.readers.keep(reader, epoch, readerSets{tooBig: true})
			}
			return readerSets{}, false, err
		}
	}
	a.readers.keep(reader, epoch, s)
	return s, true, nil
}

// readKeySet adds of(k) to set for each key k that q lists (keys only, page by page); complete is
// false, and set partial, once set passed readerEdgesMax.
func (a *App) readKeySet(ctx context.Context, q table.Query, of func(table.Key) string, set map[string]bool) (complete bool, err error) {
	q.Limit, q.KeysOnly = table.MaxQueryLimit, true
	for {
		page, err := a.table.Query(ctx, q)
		if err != nil {
			return false, err
		}
		for _, k := range page.Keys {
			set[of(k)] = true
		}
		if page.Next == "" {
			return true, nil
		}
		if len(set) >= readerEdgesMax {
			return false, nil
		}
		q.Cursor = page.Next
	}
}

// idSet is a set of ids kept per user (keptByUser: in the store's only writer, where index
// queries are exact), read whole with one keys-only query: the posts a user likes (likedOf), the
// users who block a user (blockersOf). A user with more than readerEdgesMax is kept as tooBig, and
// asked key by key. Kept sets are shared by their readers, who must not change them.
type idSet struct {
	ids    map[string]bool
	tooBig bool
}

func (s idSet) size() int { return 1 + len(s.ids) }

// keptSetOf returns user's set in kept if it is kept, or read whole with q (each key it lists
// giving an id by of) and kept when whole is set; ok is false when it is not known so (nothing is
// kept in this process, a change is under way, or it is too big).
func (a *App) keptSetOf(ctx context.Context, kept *keptByUser[idSet], user string, q table.Query, of func(table.Key) string, whole bool) (ids map[string]bool, ok bool, err error) {
	if s, ok := kept.get(user); ok || !whole {
		return s.ids, ok && !s.tooBig, nil
	}
	epoch, ok := kept.begin(user)
	if !ok {
		return nil, false, nil
	}
	ids = map[string]bool{}
	complete, err := a.readKeySet(ctx, q, of, ids)
	if err != nil || !complete {
		if err == nil {
			kept.keep(user, epoch, idSet{tooBig: true})
		}
		return nil, false, err
	}
	if len(ids) == 0 {
		ids = nil // most users have none: their sets are kept at no map's cost
	}
	kept.keep(user, epoch, idSet{ids: ids})
	return ids, true, nil
}

// blockersOf returns who blocks user (keptSetOf), so that asking whether the users a post
// mentions, or a notification's recipients, have blocked its author reads one index range a user,
// once, instead of a key a recipient every time. Every block written or deleted goes through
// edgeChange, which drops its blocked user's set.
func (a *App) blockersOf(ctx context.Context, user string) (map[string]bool, bool, error) {
	return a.keptSetOf(ctx, a.blockers, user, table.Query{Index: gsi3.Name, PK: blockedByPK(user)}, edgeFrom, true)
}

// haveBlocked reports, for each of owners, whether they have blocked actor: from actor's blockers
// (blockersOf) where they are known, else one key an owner.
func (a *App) haveBlocked(ctx context.Context, owners []string, actor string) ([]bool, error) {
	out := make([]bool, len(owners))
	if blockers, ok, err := a.blockersOf(ctx, actor); err != nil {
		return nil, err
	} else if ok {
		for i, o := range owners {
			out[i] = blockers[o]
		}
		return out, nil
	}
	return a.exist(ctx, owners, func(o string) table.Key { return blockKey(o, actor) })
}

// exist reports, for each of ids, whether an item is at key(id) (one batch read).
func (a *App) exist(ctx context.Context, ids []string, key func(string) table.Key) ([]bool, error) {
	keys := make([]table.Key, len(ids))
	for i, id := range ids {
		keys[i] = key(id)
	}
	got, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for i, it := range got {
		out[i] = it != nil
	}
	return out, nil
}

// blockedFor returns which of users a block stands between the caller and, either way: as their
// posts are, their likes and comments are hidden from the caller. A server token (acting for no
// user) sees everyone's.
func (a *App) blockedFor(ctx context.Context, users []string) (map[string]bool, error) {
	viewer := ""
	if c, ok := rookery.CallerFrom(ctx); ok {
		viewer = c.Acting()
	}
	if viewer == "" || len(users) == 0 {
		return nil, nil
	}
	v, err := a.loadView(ctx, viewer, users, nil, nil, false)
	if err != nil {
		return nil, err
	}
	return v.blocked, nil
}

// likeChange marks a change of user's likes as under way until the returned func is called.
func (a *App) likeChange(user string) (done func()) { return a.liked.change(user) }

// likedOf returns the posts reader likes (keptSetOf), so that a page's liked_by_me is no point
// read per post. Every like and unlike is bracketed by a change of the liker (likeChange).
func (a *App) likedOf(ctx context.Context, reader string, whole bool) (map[string]bool, bool, error) {
	return a.keptSetOf(ctx, a.liked, reader, table.Query{Index: gsi1.Name, PK: likedByPK(reader)}, postOf, whole)
}

// followingFromSets returns whom user follows from their kept sets, if kept (in no order).
func (a *App) followingFromSets(user string) ([]string, bool) {
	s, ok := a.readers.get(user)
	if !ok || s.tooBig {
		return nil, false
	}
	return slices.Collect(maps.Keys(s.follows)), true
}

// readersOf returns the readers' edges d's App keeps, nil for none.
func readersOf(d Deps) *readerEdges { return keptForReads(d, readerSets.size) }

// idSetsOf returns the sets of ids (idSet) d's App keeps of one kind, nil for none.
func idSetsOf(d Deps) *keptByUser[idSet] { return keptForReads(d, idSet.size) }

// keptForReads returns what the read path keeps of readers, nil for none: only in the store's only
// writer, and only where index queries are exact (some of it is read from an index).
func keptForReads[V any](d Deps, size func(V) int) *keptByUser[V] {
	if !d.SoleWriter || d.IndexLag != 0 {
		return nil
	}
	return newKeptByUser(d.FollowerCacheIDs, size)
}
