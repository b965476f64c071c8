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
// kept sets of both, until the returned func is called.
func (a *App) edgeChange(from, to string) (done func()) {
	d1, d2 := a.readers.change(from), a.readers.change(to)
	return func() { d1(); d2() }
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
		q := kind.q
		q.Limit, q.KeysOnly = table.MaxQueryLimit, true
		for {
			page, err := a.table.Query(ctx, q)
			if err != nil {
				return readerSets{}, false, err
			}
			for _, k := range page.Keys {
				kind.set[kind.other(k)] = true
			}
			if page.Next == "" {
				break
			}
			if len(kind.set) >= readerEdgesMax {
				a.readers.keep(reader, epoch, readerSets{tooBig: true})
				return readerSets{}, false, nil
			}
			q.Cursor = page.Next
		}
	}
	a.readers.keep(reader, epoch, s)
	return s, true, nil
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
func readersOf(d Deps) *readerEdges {
	if !d.SoleWriter || d.IndexLag != 0 {
		return nil
	}
	return newKeptByUser(d.FollowerCacheIDs, readerSets.size)
}
