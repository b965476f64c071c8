// Package streak holds the rules of daily streaks (seed 001), as pure functions over calendar
// days: what counts as a day, how consecutive days, missed days, streak freezes and excused
// (outage) days make a streak, and how a streak kept incrementally, one late or early activity at a
// time, stays equal to the streak computed from the whole set of active days.
//
// The rules, in one place (docs/engagement.md repeats them for users of the API):
//
//   - A day is a calendar day in the user's time zone at the moment of the activity (DateOf).
//   - The days of a user's activity, in ascending order, fold into a Summary (Fold). The first day
//     starts a streak of 1. Each later day adds 1 to the streak when no day between it and the
//     previous active day is missed. A missed day is a day without activity that is not excused.
//     When k days are missed and the user holds at least k freezes, k freezes are consumed and the
//     streak goes on (frozen days keep the streak; they do not lengthen it); otherwise the streak
//     starts again at 1. The freezes held survive a broken streak.
//   - Each time the streak reaches a multiple of FreezeEvery (7) days, the user earns a freeze,
//     unless they already hold MaxFreezes (2).
//   - Longest is the longest streak ever reached; it never decreases.
//   - Read on a given day (Summary.CurrentOn), the current streak is the streak of the last active
//     day if the days missed since (not counting the day read on, which is still open) can be
//     paid with the freezes held, and 0 otherwise, although nothing was written.
//   - Excused days are days an outage of the service made impossible to record (`rookery streaks
//     repair`): they are neither active nor missed.
//
// Invariant (checked by the property test): for any order in which activities arrive, as long as
// none arrives for a day at or before the settled horizon (State), the incrementally kept State
// summarizes to exactly Fold of the sorted set of all active days.
package streak

import (
	"fmt"
	"slices"
	"time"
)

// Rules of freezes.
const (
	// MaxFreezes is how many streak freezes a user holds at most.
	MaxFreezes = 2
	// FreezeEvery: a freeze is earned each time the streak reaches a multiple of this many days.
	FreezeEvery = 7
)

// Date is a calendar day, as the number of days since 1970-01-01. Its zero value is that day;
// a Summary with Current 0 has no meaningful Last.
type Date int32

// DateOf returns the calendar day of t in loc.
func DateOf(t time.Time, loc *time.Location) Date {
	y, m, d := t.In(loc).Date()
	return DateFromYMD(y, m, d)
}

// DateFromYMD returns the day y-m-d.
func DateFromYMD(y int, m time.Month, d int) Date {
	return Date(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// ParseDate parses "YYYY-MM-DD".
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a date YYYY-MM-DD", s)
	}
	return Date(t.Unix() / 86400), nil
}

// Time returns midnight UTC of d.
func (d Date) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String returns d as "YYYY-MM-DD".
func (d Date) String() string { return d.Time().Format(time.DateOnly) }

// Summary is the fold of a user's active days up to and including Last.
type Summary struct {
	Current int  // the streak ending on Last (0: no active day yet)
	Longest int  // the longest streak ever reached
	Freezes int  // freezes held after Last
	Last    Date // the last active day (meaningful when Current > 0)
}

// missed counts the days strictly between from and to that are not excused.
func missed(from, to Date, excused []Date) int {
	n := int(to - from - 1)
	if n <= 0 {
		return 0
	}
	for _, e := range excused {
		if e > from && e < to {
			n--
		}
	}
	return n
}

// Step returns s after one more active day d, later than s.Last (a day at or before s.Last
// changes nothing). excused holds the excused days.
func (s Summary) Step(d Date, excused []Date) Summary {
	switch {
	case s.Current == 0:
		s.Current = 1
	case d <= s.Last:
		return s
	default:
		switch k := missed(s.Last, d, excused); {
		case k == 0:
			s.Current++
		case k <= s.Freezes:
			s.Freezes -= k
			s.Current++
		default:
			s.Current = 1
		}
	}
	if s.Current%FreezeEvery == 0 && s.Freezes < MaxFreezes {
		s.Freezes++
	}
	s.Last = d
	s.Longest = max(s.Longest, s.Current)
	return s
}

// Fold returns the summary of days (in any order, duplicates allowed) with excused days: the
// streak computed from the whole set of active days, which the incremental State must equal.
func Fold(days, excused []Date) Summary {
	days = slices.Clone(days)
	slices.Sort(days)
	var s Summary
	for _, d := range days {
		s = s.Step(d, excused)
	}
	return s
}

// CurrentOn returns the current streak read on day today, and the freezes that will be left once
// the missed days since Last are paid: the streak is 0 if the freezes cannot pay for them.
func (s Summary) CurrentOn(today Date, excused []Date) (current, freezes int) {
	if s.Current == 0 {
		return 0, s.Freezes
	}
	k := missed(s.Last, today, excused)
	if k > s.Freezes {
		return 0, s.Freezes
	}
	return s.Current, s.Freezes - k
}

// State is a user's streak as Rookery keeps it: the summary of every active day up to a settled
// horizon (no activity can arrive for those days any more, since activities may be at most a few
// days late), and the active days after it, which are kept as days so that a late activity can
// still fill a gap.
type State struct {
	Settled Summary
	Recent  []Date // active days after Settled.Last, ascending, without duplicates
	Excused []Date // excused days, ascending
}

// Settles reports whether day d is at or before the settled horizon: activity on it arrives too
// late to change the streak.
func (st *State) Settles(d Date) bool { return st.Settled.Current > 0 && d <= st.Settled.Last }

// Add records activity on day d and reports whether d is a new active day. A day the state
// settles is not new.
func (st *State) Add(d Date) bool {
	if st.Settles(d) {
		return false
	}
	i, found := slices.BinarySearch(st.Recent, d)
	if found {
		return false
	}
	st.Recent = slices.Insert(st.Recent, i, d)
	return true
}

// Settle folds the recent days before horizon into Settled.
func (st *State) Settle(horizon Date) {
	n := 0
	for n < len(st.Recent) && st.Recent[n] < horizon {
		st.Settled = st.Settled.Step(st.Recent[n], st.Excused)
		n++
	}
	st.Recent = slices.Delete(st.Recent, 0, n)
	// Excused days before the last settled day can no longer matter.
	if st.Settled.Current > 0 {
		k := 0
		for k < len(st.Excused) && st.Excused[k] < st.Settled.Last {
			k++
		}
		st.Excused = slices.Delete(st.Excused, 0, k)
	}
}

// Summary returns the summary of every active day: Settled with Recent folded in.
func (st State) Summary() Summary {
	s := st.Settled
	for _, d := range st.Recent {
		s = s.Step(d, st.Excused)
	}
	return s
}

// Excuse marks the days from..to (inclusive) that are not active as excused and returns them.
func (st *State) Excuse(from, to Date, active func(Date) bool) []Date {
	var added []Date
	for d := from; d <= to; d++ {
		if active(d) {
			continue
		}
		i, found := slices.BinarySearch(st.Excused, d)
		if !found {
			st.Excused = slices.Insert(st.Excused, i, d)
			added = append(added, d)
		}
	}
	return added
}

// SettleLag is how many days before today the settled horizon lies. Activities may arrive up to
// 48 hours late (LateBy), and time zones differ by up to 26 hours, so no activity can arrive for a
// day more than 4 days before the day the server records it on; 5 leaves a margin.
const SettleLag = 5

// LateBy and EarlyBy bound an activity's occurred_at against the time it is recorded.
const (
	LateBy  = 48 * time.Hour
	EarlyBy = 5 * time.Minute
)

// Zone rules: a user whose time zone changed more than MaxZoneChanges times within ZoneWindow
// does not count toward the streak until ZoneWindow has passed since the oldest of those changes
// (seed 001 recent_tz_changes: moving across zones to win extra days is abuse).
const (
	MaxZoneChanges = 2
	ZoneWindow     = 7 * 24 * time.Hour
)

// ZoneChange is one change of a user's time zone.
type ZoneChange struct {
	At       time.Time
	From, To string
}

// ZoneAt returns the zone in effect at t, given the user's current zone and their recent changes
// in ascending order of time.
func ZoneAt(t time.Time, current string, changes []ZoneChange) string {
	for i := len(changes) - 1; i >= 0; i-- {
		if !t.Before(changes[i].At) {
			return changes[i].To
		}
		if i == 0 {
			return changes[0].From
		}
	}
	return current
}

// Counts reports whether an activity at t counts toward the streak: it does unless more than
// MaxZoneChanges changes fall within ZoneWindow before it (the window (t-ZoneWindow, t]).
func Counts(t time.Time, changes []ZoneChange) bool {
	n := 0
	for _, c := range changes {
		if c.At.After(t.Add(-ZoneWindow)) && !c.At.After(t) {
			n++
		}
	}
	return n <= MaxZoneChanges
}

// KeepChanges drops the changes that can no longer matter at time now: those older than
// ZoneWindow plus LateBy (an activity can be that late), keeping the newest always.
func KeepChanges(changes []ZoneChange, now time.Time) []ZoneChange {
	cut := now.Add(-ZoneWindow - LateBy)
	i := 0
	for i < len(changes)-1 && changes[i].At.Before(cut) {
		i++
	}
	return changes[i:]
}
