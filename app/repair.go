package app

import (
	"context"
	"errors"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/streak"
	"github.com/rookery/rookery/table"
)

// StreakRepair is what RepairStreaks changed for one user.
type StreakRepair struct {
	UserID  string   `json:"user_id"`
	Excused []string `json:"excused"` // the local days excused
	Before  int      `json:"before"`  // the current streak before and after the repair
	After   int      `json:"after"`
}

// RepairStreaks keeps alive the streaks that an outage of the service from `from` to `to` would
// otherwise break (`rookery streaks repair`). For every user on the streak leaderboard (every
// streak that is alive, or broken for less than a week) whose last active day is close enough to
// the outage for it to matter, the local days of the window on which the user has no activity are
// excused: they are neither active nor missed (package streak). The user's streak is then computed
// again from their daily records, which are kept for ever. report is called for each user changed.
// Running it again changes nothing more. Server tokens only.
func (a *App) RepairStreaks(ctx context.Context, from, to time.Time, report func(StreakRepair)) (checked int, err error) {
	const op rookery.Op = "app.RepairStreaks"
	if err := asServer(ctx, op); err != nil {
		return 0, err
	}
	if !from.Before(to) || to.After(a.clock.Now().Add(time.Hour)) {
		return 0, rookery.FieldErrors{{Name: "to", Reason: "must be after from and not in the future"}}.Err(op)
	}
	for s := range a.eng.StreakShards {
		var users []string
		err := table.EachPage(ctx, a.table, streakBoardQuery(s), func(items []table.Item) error {
			for _, it := range items {
				users = append(users, it.String("user_id"))
			}
			return nil
		})
		if err != nil {
			return checked, err
		}
		for _, u := range users {
			checked++
			r, changed, err := a.repairStreak(ctx, op, u, from, to)
			if err != nil {
				return checked, err
			}
			if changed && report != nil {
				report(r)
			}
		}
	}
	return checked, nil
}

// repairStreak excuses the outage days of one user and recomputes their streak.
func (a *App) repairStreak(ctx context.Context, op rookery.Op, user string, from, to time.Time) (StreakRepair, bool, error) {
	for {
		rec, err := a.loadStreak(ctx, op, user, false)
		if err != nil {
			return StreakRepair{}, false, err
		}
		now := a.clock.Now()
		// The window's local days, in the user's zones at its two ends.
		first := streak.DateOf(from, locationOf(streak.ZoneAt(from, rec.Zone, rec.Changes)))
		last := streak.DateOf(to, locationOf(streak.ZoneAt(to, rec.Zone, rec.Changes)))
		days, err := a.streakDays(ctx, user)
		if err != nil {
			return StreakRepair{}, false, err
		}
		active := map[streak.Date]bool{}
		var before []streak.Date
		for _, d := range days {
			active[d] = true
			if d < first {
				before = append(before, d)
			}
		}
		if alive, _ := streak.Fold(before, rec.State.Excused).CurrentOn(first, rec.State.Excused); alive == 0 {
			return StreakRepair{}, false, nil // no streak was alive when the outage began
		}
		st := streak.State{Excused: rec.State.Excused}
		added := st.Excuse(first, last, func(d streak.Date) bool { return active[d] })
		if len(added) == 0 {
			return StreakRepair{}, false, nil
		}
		for _, d := range days {
			st.Add(d)
		}
		st.Settle(streak.DateOf(now, rec.location()) - streak.SettleLag)
		r := StreakRepair{UserID: user, Before: rec.view(now).CurrentStreak}
		old := rec.Version
		rec.State, rec.Version = st, old+1
		r.After = rec.view(now).CurrentStreak
		for _, d := range added {
			r.Excused = append(r.Excused, d.String())
		}
		err = a.table.TransactWrite(ctx, []table.Write{table.PutWrite(rec.item(a.eng.StreakShards), table.VersionIs("version", old))})
		var ce *table.ConditionError
		if errors.As(err, &ce) {
			continue // an activity came in: start again
		}
		if err != nil {
			return StreakRepair{}, false, err
		}
		a.cacheStreak(ctx, rec)
		return r, true, nil
	}
}

// streakDays returns every local day on which user had activity that counted toward the streak,
// ascending, from their daily records.
func (a *App) streakDays(ctx context.Context, user string) ([]streak.Date, error) {
	var days []streak.Date
	err := table.EachPage(ctx, a.table, dailyQuery(user), func(items []table.Item) error {
		for _, it := range items {
			if !it.Bool("streak_day") {
				continue
			}
			d, err := dayOfDaily(it.String(table.SK))
			if err != nil {
				return rookery.E("app.streakDays", rookery.Internal, err)
			}
			days = append(days, d)
		}
		return nil
	})
	return days, err
}
