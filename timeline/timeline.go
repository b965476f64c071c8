// Package timeline defines the store of home timelines (DESIGN decision 3): per user, references to
// the posts of the people they follow, newest first, capped. Posts are hydrated at read time, so an
// entry is only a reference (post id, author id, time). Backends: table-backed (timeline/tablestore, on
// the table interface: Pebble or DynamoDB) and Redis sorted sets; timelinetest is the conformance
// suite both run.
//
// A timeline is missing, being built, or complete. Push adds to every timeline that exists (built
// or complete); a missing timeline (a new user, a reader inactive for long, Redis restarted) is
// built by the read path: Begin makes it exist as being built, so that fan-out of a post committed
// from then on reaches it, the read path pulls, and Complete publishes it. Only a complete timeline
// is read (Page); one whose build failed stays being built and is built again by the next read.
//
// Invariant: a complete timeline holds every post fanned out to it that is not older than its
// floor. The floor starts at the build's pull floor (zero: everything) and only rises: trims
// raise it to the newest entry they cut, DropOlder to its entry. Below the floor a timeline says
// nothing, and Page shows nothing from there: an entry pushed late, below what the timeline covers
// (a retried fan-out after an outage), may be stored but is never shown, so it cannot hide the
// posts trims took or a rebuild did not pull from above it.
package timeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// Below reports whether e is older than floor; nothing is below the zero floor.
func (e Entry) Below(floor Entry) bool { return floor.PostID != "" && e.Older(floor) }

// Page is one page of a timeline.
type Page struct {
	Entries []Entry
	Exists  bool // false if the timeline is missing or being built (Entries is then empty)
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
	// Push adds e to the timeline of each user in users whose timeline exists (complete or being
	// built), and trims each to the cap (possibly lazily: a timeline may briefly hold a few more,
	// the oldest), raising its floor to the newest entry cut. Adding an entry a timeline holds
	// already changes nothing (fan-out is redelivered).
	Push(ctx context.Context, users []string, e Entry) error

	// Page returns up to limit (1..100) entries of user's complete timeline that are older than
	// before (the zero Entry: from the newest) and not older than its floor, newest first. Fewer
	// than limit means there are no more. Paging by the last entry of a page never repeats an
	// entry and never skips one that was there throughout. A timeline being built reads as
	// missing (Exists false). Reading a timeline keeps it active.
	Page(ctx context.Context, user string, before Entry, limit int) (Page, error)

	// Exists reports whether user's timeline exists, complete or being built (Push reaches it).
	Exists(ctx context.Context, user string) (bool, error)

	// Begin makes user's missing timeline exist, empty and being built, and returns the build's id.
	// A timeline being built already keeps what it holds and returns its build's id; a complete one
	// is left alone and "" is returned (nothing to build).
	Begin(ctx context.Context, user string) (build string, err error)

	// Complete publishes user's timeline if it is still being built by build: it adds the entries
	// not older than floor (a rebuild's pull, complete down to floor; zero: everything), raises the
	// timeline's floor to floor, marks it complete, and trims it to exactly the cap. It reports
	// whether it did; false means the timeline is missing, complete, or rebuilt by another build
	// since (a build that began after this one's pull: its own pull will cover what this one's
	// missed).
	Complete(ctx context.Context, user, build string, entries []Entry, floor Entry) (bool, error)

	// Create makes user's timeline exist and complete, holding exactly entries (the newest cap of
	// them), floor zero. For tests and tools: the read path builds with Begin and Complete.
	Create(ctx context.Context, user string, entries []Entry) error

	// Merge adds the entries that are not older than the floor of user's timeline, if it exists,
	// and trims it to exactly the cap, newest kept. The floor is read and checked in one atomic
	// step with the write. To merge an author's newest posts when they have more, first raise the
	// floor to the oldest one merged (DropOlder).
	Merge(ctx context.Context, user string, entries []Entry) error

	// DropOlder raises the floor of user's timeline to e (if it is lower) and removes the entries
	// older than e.
	DropOlder(ctx context.Context, user string, e Entry) error

	// Remove removes post from user's timeline (absent is a success).
	Remove(ctx context.Context, user, postID string) error

	// RemoveAuthor removes every entry of author from user's timeline (unfollow, block, mute).
	RemoveAuthor(ctx context.Context, user, author string) error

	// RemovePost removes post from every timeline that holds it, in time proportional to the number
	// of copies, never by scanning timelines (seed 004: delete by post through an index).
	RemovePost(ctx context.Context, postID string) error

	// Delete removes user's timeline whole (the account was deleted): it is missing afterwards,
	// so Push no longer reaches it. Deleting a missing timeline is a success.
	Delete(ctx context.Context, user string) error
}

// NewBuild returns a new build id for Begin: random, so that builds of one timeline by different
// processes, or after it was lost (Redis restarted empty), never share one.
func NewBuild() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
// Complete and Merge).
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
