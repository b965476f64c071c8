package app

import (
	"strings"
	"sync"
)

// followerLists keeps authors' follower lists in memory for fan-out and the live consumer, in a
// process that is the only writer of follows to its store (the embedded store: one process opens
// it). Fan-out reads the followers of every post's author; for the authors who post most, it read
// the same list again and again.
//
// Every write of a follow edge is bracketed by change(followee). While a change is under way the
// author's list is read from the store; a list read from the store is kept only if no change
// began or ended while it was read; a change drops the author's list when it begins and when it
// ends. So a list served from memory is the store's list as of now, as fan-out's argument
// against the follow's merge needs (a follow committed before a post is either seen by the post's
// fan-out or merges the post: ApplyTimelineCleanup).
type followerLists struct {
	maxIDs  int // the most follower ids kept, over all lists
	maxList int // the longest list kept

	mu       sync.Mutex
	lists    map[string]keptList
	ids      int
	changing map[string]int // authors with changes under way, and how many
	epoch    uint64         // grows when any change begins or ends
}

// keptList is a list kept, its ids joined by spaces (user ids have none): one allocation a list,
// not one an id.
type keptList struct {
	joined string
	n      int
}

// newFollowerLists returns lists keeping up to maxIDs ids, or nil (no cache) if maxIDs <= 0.
func newFollowerLists(maxIDs, maxList int) *followerLists {
	if maxIDs <= 0 {
		return nil
	}
	return &followerLists{maxIDs: maxIDs, maxList: maxList, lists: map[string]keptList{}, changing: map[string]int{}}
}

// change marks a change of author's followers as under way until the returned func is called.
func (f *followerLists) change(author string) (done func()) {
	if f == nil {
		return func() {}
	}
	f.mu.Lock()
	f.changing[author]++
	f.forgetLocked(author)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.changing[author]--; f.changing[author] == 0 {
			delete(f.changing, author)
		}
		f.forgetLocked(author)
		f.mu.Unlock()
	}
}

func (f *followerLists) forgetLocked(author string) {
	f.epoch++
	f.ids -= f.lists[author].n
	delete(f.lists, author)
}

// get returns author's list if it is kept.
func (f *followerLists) get(author string) ([]string, bool) {
	if f == nil {
		return nil, false
	}
	f.mu.Lock()
	l, ok := f.lists[author]
	f.mu.Unlock()
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

// fill starts gathering author's list, or returns nil if it could not be kept.
func (f *followerLists) fill(author string) *followerFill {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changing[author] > 0 {
		return nil
	}
	return &followerFill{author: author, epoch: f.epoch, max: f.maxList}
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
// ended meanwhile, dropping other lists if the ids would pass the bound.
func (f *followerLists) keep(ff *followerFill) {
	if f == nil || ff == nil || ff.tooBig || len(ff.ids) > f.maxIDs {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch != ff.epoch {
		return
	}
	f.ids -= f.lists[ff.author].n // kept by another fill meanwhile
	delete(f.lists, ff.author)
	for a, l := range f.lists { // in no particular order
		if f.ids+len(ff.ids) <= f.maxIDs {
			break
		}
		f.ids -= l.n
		delete(f.lists, a)
	}
	f.lists[ff.author] = keptList{joined: strings.Join(ff.ids, " "), n: len(ff.ids)}
	f.ids += len(ff.ids)
}
