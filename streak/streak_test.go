package streak_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rookery/rookery/streak"
)

// TestIncrementalEqualsFold is the package's invariant: activities arriving in any order, each at
// most SettleLag-1 days after its day, with the state settled on every arrival, summarize to the
// fold of the whole set of active days, and read the same on any later day.
func TestIncrementalEqualsFold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const span = 60
		days := rapid.SliceOfN(rapid.Int32Range(0, span), 0, 80).Draw(t, "days")
		excused := rapid.SliceOfNDistinct(rapid.Int32Range(0, span), 0, 6, rapid.ID).Draw(t, "excused")
		type arrival struct{ day, on streak.Date }
		var arrivals []arrival
		for i, d := range days {
			late := rapid.Int32Range(0, streak.SettleLag-1).Draw(t, "late"+string(rune('a'+i%26)))
			arrivals = append(arrivals, arrival{streak.Date(d), streak.Date(d + late)})
		}
		// Arrivals come in the order of the day they are recorded on; within a day, any order.
		perm := rapid.Permutation(arrivals).Draw(t, "order")
		slices.SortStableFunc(perm, func(x, y arrival) int { return int(x.on - y.on) })

		var ex []streak.Date
		for _, e := range excused {
			ex = append(ex, streak.Date(e))
		}
		slices.Sort(ex)
		st := streak.State{Excused: slices.Clone(ex)}
		all := []streak.Date{}
		for _, a := range perm {
			st.Add(a.day)
			st.Settle(a.on - streak.SettleLag)
			all = append(all, a.day)
		}
		want := streak.Fold(all, ex)
		if got := st.Summary(); got != want {
			t.Fatalf("incremental %+v, fold of all days %+v (state %+v)", got, want, st)
		}
		read := streak.Date(rapid.Int32Range(span, span+5).Draw(t, "read"))
		gc, gf := st.Summary().CurrentOn(read, st.Excused)
		wc, wf := want.CurrentOn(read, ex)
		if gc != wc || gf != wf {
			t.Fatalf("read on %v: incremental %d/%d freezes, fold %d/%d", read, gc, gf, wc, wf)
		}
	})
}

func TestFoldRules(t *testing.T) {
	d := func(s string) streak.Date {
		x, err := streak.ParseDate(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	days := func(from streak.Date, n int) []streak.Date {
		var out []streak.Date
		for i := range n {
			out = append(out, from+streak.Date(i))
		}
		return out
	}
	week := days(d("2026-01-01"), 7)
	cases := []struct {
		name    string
		days    []streak.Date
		excused []streak.Date
		want    streak.Summary
	}{
		{"no days", nil, nil, streak.Summary{}},
		{"one day", []streak.Date{d("2026-01-01")}, nil, streak.Summary{Current: 1, Longest: 1, Last: d("2026-01-01")}},
		{"a gap breaks", []streak.Date{d("2026-01-01"), d("2026-01-03")}, nil, streak.Summary{Current: 1, Longest: 1, Last: d("2026-01-03")}},
		{"an excused gap does not", []streak.Date{d("2026-01-01"), d("2026-01-03")}, []streak.Date{d("2026-01-02")}, streak.Summary{Current: 2, Longest: 2, Last: d("2026-01-03")}},
		{"seven days earn a freeze", week, nil, streak.Summary{Current: 7, Longest: 7, Freezes: 1, Last: d("2026-01-07")}},
		{"a freeze pays for a missed day", append(slices.Clone(week), d("2026-01-09")), nil, streak.Summary{Current: 8, Longest: 8, Freezes: 0, Last: d("2026-01-09")}},
		{"at most two freezes are held", days(d("2026-01-01"), 21), nil, streak.Summary{Current: 21, Longest: 21, Freezes: 2, Last: d("2026-01-21")}},
		{"a broken streak keeps its freezes", append(days(d("2026-01-01"), 14), d("2026-01-20")), nil, streak.Summary{Current: 1, Longest: 14, Freezes: 2, Last: d("2026-01-20")}},
		{"two missed days with one freeze break", append(slices.Clone(week), d("2026-01-10")), nil, streak.Summary{Current: 1, Longest: 7, Freezes: 1, Last: d("2026-01-10")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := streak.Fold(c.days, c.excused); got != c.want {
				t.Fatalf("Fold = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestZones(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	changes := []streak.ZoneChange{
		{At: base, From: "UTC", To: "Asia/Tokyo"},
		{At: base.Add(24 * time.Hour), From: "Asia/Tokyo", To: "America/New_York"},
		{At: base.Add(48 * time.Hour), From: "America/New_York", To: "Europe/Berlin"},
	}
	if z := streak.ZoneAt(base.Add(-time.Hour), "Europe/Berlin", changes); z != "UTC" {
		t.Errorf("zone before every change = %s, want UTC", z)
	}
	if z := streak.ZoneAt(base.Add(30*time.Hour), "Europe/Berlin", changes); z != "America/New_York" {
		t.Errorf("zone between changes = %s", z)
	}
	if !streak.Counts(base.Add(47*time.Hour), changes) {
		t.Error("two changes in a week stop counting")
	}
	if streak.Counts(base.Add(48*time.Hour), changes) {
		t.Error("a third change within a week still counts")
	}
	if !streak.Counts(base.Add(7*24*time.Hour), changes) {
		t.Error("still not counting once the first of the three changes is 7 days old")
	}
}
