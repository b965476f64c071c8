package httpapi

import (
	"net/http"
	"strconv"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
)

// recordActivity is POST /v1/activities: 201 for a new activity, 200 for a duplicate key.
func (s *server) recordActivity(w http.ResponseWriter, r *http.Request) {
	var in app.ActivityInput
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	res, err := s.App.RecordActivity(r.Context(), in)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	encode(w, status, res)
}

func (s *server) getStreak(w http.ResponseWriter, r *http.Request) {
	st, err := s.App.UserStreak(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, st)
}

func (s *server) getPoints(w http.ResponseWriter, r *http.Request) {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		var err error
		if days, err = strconv.Atoi(v); err != nil {
			s.problem(w, r, rookery.FieldErrors{{Name: "days", Reason: "must be a whole number from 1 to 90"}}.Err("httpapi.getPoints"))
			return
		}
	}
	ps, err := s.App.Points(r.Context(), r.PathValue("id"), days)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string][]app.DayPoints{"days": ps})
}

func (s *server) streakBoard(w http.ResponseWriter, r *http.Request) {
	limit, _, err := listParams(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	items, err := s.App.TopStreaks(r.Context(), limit)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string][]app.StreakRank{"items": items})
}

func (s *server) authorBoard(w http.ResponseWriter, r *http.Request) {
	limit, _, err := listParams(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	q := r.URL.Query()
	items, err := s.App.TopAuthors(r.Context(), q.Get("period"), q.Get("at"), limit)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string][]app.AuthorRank{"items": items})
}

// repairStreaks is POST /v1/admin/streaks/repair {"from","to"} (server tokens): `rookery streaks
// repair`. Every change is logged and returned.
func (s *server) repairStreaks(w http.ResponseWriter, r *http.Request) {
	var in struct {
		From rookery.Time `json:"from"`
		To   rookery.Time `json:"to"`
	}
	if err := decode(r, &in); err != nil {
		s.problem(w, r, err)
		return
	}
	reply := s.outlast(w) // it reads every user who was active in the window
	changes := []app.StreakRepair{}
	checked, err := s.App.RepairStreaks(r.Context(), in.From.Time, in.To.Time, func(c app.StreakRepair) {
		s.Log.Info("streak repaired", "user", c.UserID, "excused", c.Excused, "before", c.Before, "after", c.After,
			"request_id", requestIDFrom(r.Context()))
		changes = append(changes, c)
	})
	reply()
	if err != nil {
		s.problem(w, r, err)
		return
	}
	encode(w, http.StatusOK, map[string]any{"checked": checked, "changes": changes})
}
