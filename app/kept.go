package app

import "sync"

// keptByUser keeps a value per user in memory, read from the store, in a process that is the only
// writer to its store of what the values are made of (the embedded store: one process opens it):
// authors' follower lists for fan-out (followerLists), readers' edges for the read path
// (readerEdges), who blocks each user (blockersOf), which users are deleted (goneUsers).
//
// Every write that changes a user's value is bracketed by change(user). While a change is under
// way the user's value is read from the store; a value read from the store is kept only if no
// change began or ended while it was read (its epoch); a change drops the user's value when it
// begins and when it ends. So a value served from memory is the store's as of now.
type keptByUser[V any] struct {
	maxSize int         // the most kept, by size, over all values
	size    func(V) int // a value's share of maxSize

	mu       sync.Mutex
	vals     map[string]V
	total    int            // the sizes of vals
	changing map[string]int // users with changes under way, and how many
	epoch    uint64         // grows when any change begins or ends
}

// newKeptByUser returns a keptByUser of up to maxSize, or nil (nothing kept) if maxSize <= 0.
func newKeptByUser[V any](maxSize int, size func(V) int) *keptByUser[V] {
	if maxSize <= 0 {
		return nil
	}
	return &keptByUser[V]{maxSize: maxSize, size: size, vals: map[string]V{}, changing: map[string]int{}}
}

// change marks a change of user's value as under way until the returned func is called.
func (k *keptByUser[V]) change(user string) (done func()) {
	if k == nil {
		return func() {}
	}
	k.mu.Lock()
	k.changing[user]++
	k.forgetLocked(user)
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		if k.changing[user]--; k.changing[user] == 0 {
			delete(k.changing, user)
		}
		k.forgetLocked(user)
		k.mu.Unlock()
	}
}

func (k *keptByUser[V]) forgetLocked(user string) {
	k.epoch++
	k.dropLocked(user)
}

func (k *keptByUser[V]) dropLocked(user string) {
	if v, ok := k.vals[user]; ok {
		k.total -= k.size(v)
		delete(k.vals, user)
	}
}

// get returns user's value if it is kept.
func (k *keptByUser[V]) get(user string) (V, bool) {
	var v V
	if k == nil {
		return v, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.vals[user]
	return v, ok
}

// begin is called before user's value is read from the store: ok is false if it could not be kept
// (a change is under way); else keep takes the epoch.
func (k *keptByUser[V]) begin(user string) (epoch uint64, ok bool) {
	if k == nil {
		return 0, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.epoch, k.changing[user] == 0
}

// current returns the epoch for a read that learns its users only from what it reads (a
// username's claim names its user): keep takes it as it takes begin's.
func (k *keptByUser[V]) current() uint64 {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.epoch
}

// keep keeps user's value v, read from the store since begin (or current) returned epoch, unless
// a change began or ended meanwhile or one of user's is under way (then it began before epoch and
// has not ended), dropping other values if the sizes would pass the bound.
func (k *keptByUser[V]) keep(user string, epoch uint64, v V) {
	if k == nil {
		return
	}
	n := k.size(v)
	if n > k.maxSize {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.epoch != epoch || k.changing[user] > 0 {
		return
	}
	k.dropLocked(user)      // kept by another reader meanwhile
	for u := range k.vals { // in no particular order
		if k.total+n <= k.maxSize {
			break
		}
		k.dropLocked(u)
	}
	k.vals[user] = v
	k.total += n
}
