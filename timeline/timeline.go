// Package timeline defines the store of home timelines (DESIGN decision 3): per user, references to
// the posts of the people they follow, newest first, capped. Posts are hydrated at read time, so an
// entry is only a reference (post id, author id, time). Backends: table-backed (timeline/tablestore, on
// the table interface: Pebble or DynamoDB) and Redis sorted sets; timelinetest is the conformance
// suite both run.
//
// A timeline either exists or does not. Push adds only to timelines that exist; a missing timeline
// (a new user, a reader inactive for long, Redis restarted) is rebuilt whole by the read path with
// Create, so a timeline that exists is never missing what fan-out delivered after it was created.
package timeline

import (
	"context"
	"hash/fnv"
	"slices"
	"time"
)

// Entry references one post in a timeline. Entries are ordered newest first by At, then by PostID.
type Entry struct {
	PostID   string
	AuthorID string
	At       time.Time // the post's creation time, to the millisecond
}

// Older reports whether e comes after f in a timeline: it is older, or as old with a smaller post id.
func (e Entry) Older(f Entry) bool {
	return e.At.Before(f.At) || e.At.Equal(f.At) && e.PostID < f.PostID
}

// Page is one page of a timeline.
type Page struct {
	Entries []Entry
	Exists  bool // false if the timeline does not exist (Entries is then empty)
}

// DefaultCap is how many entries a timeline keeps.
const DefaultCap = 800

// Limits are what every store keeps to.
type Limits struct {
	Cap int           // entries kept per timeline; 0 means DefaultCap
	TTL time.Duration // entries expire this long after their post; 0 means 30 days
	// InactiveAfter: a timeline unread this long stops existing; 0 means 14 days.
	InactiveAfter time.Duration
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.Cap <= 0 {
		l.Cap = DefaultCap
	}
	if l.TTL <= 0 {
		l.TTL = 30 * 24 * time.Hour
	}
	if l.InactiveAfter <= 0 {
		l.InactiveAfter = 14 * 24 * time.Hour
	}
	return l
}

// Store keeps home timelines. Implementations are safe for concurrent use. Errors are
// *rookery.Error: Invalid for malformed arguments, Unavailable when the backend is down (safe to
// retry), Internal otherwise.
//
// A timeline that nobody reads for the store's inactivity period stops existing (Push skips it and
// the read path rebuilds it), so fan-out does no work for readers who are gone.
type Store interface {
	// Push adds e to the timeline of each user in users whose timeline exists, and trims each to the
	// cap (possibly lazily: a timeline may briefly hold a few more, the oldest). Adding an entry a
	// timeline holds already changes nothing (fan-out is redelivered).
	Push(ctx context.Context, users []string, e Entry) error

	// Page returns up to limit (1..100) entries of user's timeline that are older than before (the
	// zero Entry: from the newest), newest first. Fewer than limit means there are no more. Paging
	// by the last entry of a page never repeats an entry and never skips one that was there
	// throughout. Reading a timeline keeps it active.
	Page(ctx context.Context, user string, before Entry, limit int) (Page, error)

	// Exists reports whether user's timeline exists.
	Exists(ctx context.Context, user string) (bool, error)

	// Create makes user's timeline exist holding exactly entries (newest cap of them): a rebuild
	// starts with Create(user, nil), then Adds what it pulled, so that nothing pushed meanwhile is lost.
	Create(ctx context.Context, user string, entries []Entry) error

	// Add adds entries to user's timeline if it exists and trims it to exactly the cap, newest kept.
	// It is for a complete set of entries (a rebuild's pull); to add one author's posts use Merge.
	Add(ctx context.Context, user string, entries []Entry) error

	// Merge adds the entries that are newer than the oldest entry of user's timeline, if it exists,
	// and trims it to exactly the cap, newest kept; an empty timeline takes none. Entries below the
	// oldest one would sit under posts of others that trims took away: the timeline would no longer
	// hold everything above its oldest entry, which the read path relies on (it pulls below it).
	// The oldest entry is read and checked in one atomic step with the write.
	Merge(ctx context.Context, user string, entries []Entry) error

	// DropOlder removes the entries of user's timeline older than e.
	DropOlder(ctx context.Context, user string, e Entry) error

	// Remove removes post from user's timeline (absent is a success).
	Remove(ctx context.Context, user, postID string) error

	// RemoveAuthor removes every entry of author from user's timeline (unfollow, block, mute).
	RemoveAuthor(ctx context.Context, user, author string) error

	// RemovePost removes post from every timeline that holds it, in time proportional to the number
	// of copies, never by scanning timelines (seed 004: delete by post through an index).
	RemovePost(ctx context.Context, postID string) error
}

// NewestFirst orders entries as a timeline shows them (a comparison for slices.SortFunc).
func NewestFirst(a, b Entry) int {
	switch {
	case b.Older(a):
		return -1
	case a.Older(b):
		return 1
	}
	return 0
}

// Newest returns the newest n of entries, newest first, each post once (for a backend's Create,
// Add and Merge).
func Newest(entries []Entry, n int) []Entry {
	es := slices.Clone(entries)
	slices.SortFunc(es, NewestFirst)
	es = slices.CompactFunc(es, func(a, b Entry) bool { return a.PostID == b.PostID })
	return es[:min(len(es), n)]
}

// TrimEvery: a backend whose trims read the whole timeline trims a given timeline on about one
// push in TrimEvery (TrimDue says which). A trim reads up to cap + the pushes since the last one,
// so trimming once in 16 pushes cost about 50 entry reads per push of a full timeline, which
// swamped fan-out under a write-heavy load; once in 256 costs about 4, and a timeline holds at
// most about cap + 256 entries (more only by chance), the oldest of which reads skip past
// harmlessly.
const TrimEvery = 256

// TrimDue reports whether the push of post to user's timeline trims it: decided by a hash, so a
// redelivered push decides the same.
func TrimDue(user, post string) bool {
	h := fnv.New32a()
	h.Write([]byte(user + "\x00" + post))
	return h.Sum32()%TrimEvery == 0
}
