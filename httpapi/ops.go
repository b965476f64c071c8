package httpapi

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"
)

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	encode(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs every readiness check at once, each bounded to two seconds, and answers 503 naming
// the parts that failed (never their error text).
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var failing []string
	var wg sync.WaitGroup
	for name, check := range s.Ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := check(ctx); err != nil {
				s.Log.Warn("readiness check failed", "check", name, "err", err)
				mu.Lock()
				failing = append(failing, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failing) > 0 {
		sort.Strings(failing)
		w.Header().Set("Retry-After", "1")
		encode(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failing": failing})
		return
	}
	encode(w, http.StatusOK, map[string]string{"status": "ready"})
}
