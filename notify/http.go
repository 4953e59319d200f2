package notify

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// ListHandler serves GET /api/notifications[?state=pending|inflight|delivered|dead&limit=N]:
// the outbox's deliveries, newest first per state, as JSON {"deliveries": [...], "counts": {...}}.
// It shows what the items' pages show (headlines, links), never a sink's URL or secret.
func ListHandler(o *Outbox) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		}
		states := AllStates()
		if s := r.URL.Query().Get("state"); s != "" {
			if !slices.Contains(states, State(s)) {
				fail(http.StatusBadRequest, "state "+strconv.Quote(s)+": want pending, inflight, delivered or dead")
				return
			}
			states = []State{State(s)}
		}
		limit := int64(50)
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1000 {
				fail(http.StatusBadRequest, "limit: want 1 to 1000")
				return
			}
			limit = n
		}
		out := struct {
			Deliveries []Delivery      `json:"deliveries"`
			Counts     map[State]int64 `json:"counts"`
		}{Deliveries: []Delivery{}}
		for _, s := range states {
			ds, err := o.List(r.Context(), s, limit)
			if err != nil {
				fail(http.StatusServiceUnavailable, "notification outbox unavailable")
				return
			}
			out.Deliveries = append(out.Deliveries, ds...)
		}
		counts, err := o.Counts(r.Context())
		if err != nil {
			fail(http.StatusServiceUnavailable, "notification outbox unavailable")
			return
		}
		out.Counts = counts
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
