package app

import (
	"context"
	"maps"
	"slices"

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

// blockerSet is who blocks a user, kept (keptByUser: in the store's only writer, where index
// queries are exact) so that asking whether the users a post mentions, or a notification's
// recipients, have blocked its author reads one index range a user, once, instead of a key a
// recipient every time. A user blocked by more than readerEdgesMax is kept as tooBig, and asked
// key by key. Every block written or deleted goes through edgeChange, which changes its blocked
// user's set.
type blockerSet struct {
	users  map[string]bool
	tooBig bool
}

func (s blockerSet) size() int { return 1 + len(s.users) }

// blockersOf returns who blocks user if it is kept, or read whole (and kept); ok is false when it
// is not known so (nothing is kept in this process, or a change is under way, or it is too big).
func (a *App) blockersOf(ctx context.Context, user string) (blockers map[string]bool, ok bool, err error) {
	if s, ok := a.blockers.get(user); ok {
		return s.users, !s.tooBig, nil
	}
	epoch, ok := a.blockers.begin(user)
	if !ok {
		return nil, false, nil
	}
	s := blockerSet{users: map[string]bool{}}
	complete, err := a.readKeySet(ctx, table.Query{Index: gsi3.Name, PK: blockedByPK(user)}, edgeFrom, s.users)
	if err != nil || !complete {
		if err == nil {
			a.blockers.keep(user, epoch, blockerSet{tooBig: true})
		}
		return nil, false, err
	}
	if len(s.users) == 0 {
		s.users = nil // most users are blocked by no one: their sets are kept at no map's cost
	}
	a.blockers.keep(user, epoch, s)
	return s.users, true, nil
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
	keys := make([]table.Key, len(owners))
	for i, o := range owners {
		keys[i] = blockKey(o, actor)
	}
	got, err := a.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, it := range got {
		out[i] = it != nil
	}
	return out, nil
}

// likedSet is the posts a reader likes, kept (keptByUser: in the store's only writer, where index
// queries are exact) so that a page's liked_by_me is no point read per post; a reader who likes
// more than readerEdgesMax posts is kept as tooBig, and read per post. Every like and unlike is
// bracketed by a change of the liker (likeChange).
type likedSet struct {
	posts  map[string]bool
	tooBig bool
}

func (s likedSet) size() int { return 1 + len(s.posts) }

// likeChange marks a change of user's likes as under way until the returned func is called.
func (a *App) likeChange(user string) (done func()) { return a.liked.change(user) }

// likedOf returns the posts reader likes if they are kept, or read whole (and kept) when whole is
// set; ok is false when they are not known so (the caller reads the likes it needs).
func (a *App) likedOf(ctx context.Context, reader string, whole bool) (map[string]bool, bool, error) {
	if s, ok := a.liked.get(reader); ok || !whole {
		return s.posts, ok && !s.tooBig, nil
	}
	epoch, ok := a.liked.begin(reader)
	if !ok {
		return nil, false, nil
	}
	s := likedSet{posts: map[string]bool{}}
	complete, err := a.readKeySet(ctx, table.Query{Index: gsi1.Name, PK: likedByPK(reader)}, postOf, s.posts)
	if err != nil || !complete {
		if err == nil {
			a.liked.keep(reader, epoch, likedSet{tooBig: true})
		}
		return nil, false, err
	}
	a.liked.keep(reader, epoch, s)
	return s.posts, true, nil
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

// blockerSetsOf returns the users' blockers d's App keeps, nil for none.
func blockerSetsOf(d Deps) *keptByUser[blockerSet] { return keptForReads(d, blockerSet.size) }

// likedSetsOf returns the readers' liked posts d's App keeps, nil for none.
func likedSetsOf(d Deps) *keptByUser[likedSet] { return keptForReads(d, likedSet.size) }

// keptForReads returns what the read path keeps of readers, nil for none: only in the store's only
// writer, and only where index queries are exact (some of it is read from an index).
func keptForReads[V any](d Deps, size func(V) int) *keptByUser[V] {
	if !d.SoleWriter || d.IndexLag != 0 {
		return nil
	}
	return newKeptByUser(d.FollowerCacheIDs, size)
}
