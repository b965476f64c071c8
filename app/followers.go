package app

import (
	"slices"
	"strings"
)

// followerLists keeps authors' follower lists in memory for fan-out and the live consumer, in a
// process that is the only writer of follows to its store (keptByUser, whose protocol every write
// of a follow edge follows: change(followee)). Fan-out reads the followers of every post's author;
// for the authors who post most, it read the same list again and again. A list served from memory
// is the store's list as of now, as fan-out's argument against the follow's merge needs (a follow
// committed before a post is either seen by the post's fan-out or merges the post:
// ApplyTimelineCleanup).
type followerLists struct {
	*keptByUser[keptList]
	maxList int // the longest list kept
}

// keptList is a list kept, its ids joined by spaces (user ids have none): one allocation a list,
// not one an id.
type keptList struct {
	joined string
	n      int
}

// newFollowerLists returns lists keeping up to maxIDs ids, or nil (no cache) if maxIDs <= 0.
func newFollowerLists(maxIDs, maxList int) *followerLists {
	kept := newKeptByUser(maxIDs, func(l keptList) int { return l.n })
	if kept == nil {
		return nil
	}
	return &followerLists{keptByUser: kept, maxList: maxList}
}

// change marks a change of author's followers as under way until the returned func is called.
func (f *followerLists) change(author string) (done func()) {
	if f == nil {
		return func() {}
	}
	return f.keptByUser.change(author)
}

// get returns author's list if it is kept.
func (f *followerLists) get(author string) ([]string, bool) {
	if f == nil {
		return nil, false
	}
	l, ok := f.keptByUser.get(author)
	if !ok || l.n == 0 {
		return nil, ok
	}
	return strings.Split(l.joined, " "), true
}

// followerFill gathers a list as it is read from the store, to be kept by keep.
type followerFill struct {
	author string
	epoch  uint64
	max    int // the longest list kept
	ids    []string
	tooBig bool
}

// kept reports whether author's list is kept (and so has at most maxList ids).
func (f *followerLists) kept(author string) bool {
	if f == nil {
		return false
	}
	_, ok := f.keptByUser.get(author)
	return ok
}

// fill starts gathering author's list, or returns nil if it could not be kept.
func (f *followerLists) fill(author string) *followerFill {
	if f == nil {
		return nil
	}
	epoch, ok := f.begin(author)
	if !ok {
		return nil
	}
	return &followerFill{author: author, epoch: epoch, max: f.maxList}
}

func (ff *followerFill) add(ids []string) {
	if ff == nil || ff.tooBig {
		return
	}
	if len(ff.ids)+len(ids) > ff.max {
		ff.tooBig, ff.ids = true, nil
		return
	}
	ff.ids = append(ff.ids, ids...)
}

// keep keeps the list ff gathered (the whole list, read from the store) unless a change began or
// ended meanwhile. It is kept in id order, the order a push sorts its users into (their markers'
// and entries' keys): sorting a sorted list is one pass.
func (f *followerLists) keep(ff *followerFill) {
	if f == nil || ff == nil || ff.tooBig {
		return
	}
	slices.Sort(ff.ids)
	f.keptByUser.keep(ff.author, ff.epoch, keptList{joined: strings.Join(ff.ids, " "), n: len(ff.ids)})
}
