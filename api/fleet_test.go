package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/api"
	"outerloop/fleet"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/scheduler/fleetview/viewtest"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// newFleetFixture serves viewtest's fleet, its items made through a queue with the gate.
func newFleetFixture(t *testing.T) (*fixture, map[string]string) {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(viewtest.YAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	gate := fleet.NewGate(env.Client, env.Prefix, nil)
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue, Fleet: gate})
	next := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	s := api.New(api.Options{Queue: q, Auth: api.NewAuth(token), Metrics: http.NotFoundHandler(), Fleet: gate,
		NextRun: func(string) (time.Time, bool) { return next, true }})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, server: s, store: store, queue: q}, viewtest.Seed(t, q)
}

func TestTemplateFleetIsPagedByRepository(t *testing.T) {
	t.Parallel()
	f, ids := newFleetFixture(t)
	code, m := f.do(t, "GET", "/api/templates/sweep/fleet?limit=2", "", "")
	rows, _ := m["rows"].([]any)
	if code != http.StatusOK || len(rows) != 2 || m["total"] != 3.0 || m["next_offset"] != 2.0 || m["next_run"] != "2030-01-02T03:00:00Z" {
		t.Fatalf("first page: %d %v", code, m)
	}
	a := rows[0].(map[string]any)
	pr, _ := a["pr"].(map[string]any)
	ci, _ := a["ci"].(map[string]any)
	if a["slug"] != "acme/a" || a["item"] != ids[viewtest.Repos[0]] || a["state"] != "queued" || pr["number"] != 7.0 ||
		ci["state"] != "failure" || a["cost_usd"] != 1.25 {
		t.Fatalf("row a: %v", a)
	}
	if tot, _ := m["totals"].(map[string]any); tot["cost_usd"] != 1.25 || tot["open_prs"] != 1.0 {
		t.Fatalf("totals: %v", m["totals"])
	}
	if _, ok := m["usage"].(map[string]any); !ok {
		t.Fatalf("no usage: %v", m)
	}
	code, m = f.do(t, "GET", "/api/templates/sweep/fleet?offset=2&limit=2", "", "")
	if rows, _ := m["rows"].([]any); code != http.StatusOK || len(rows) != 1 || m["next_offset"] != nil {
		t.Fatalf("last page: %d %v", code, m)
	}
}

func TestTemplateFleetRefusesBadRequests(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/api/templates/nope/fleet", "unknown template", http.StatusNotFound},
		{"/api/templates/single/fleet", "one repository", http.StatusBadRequest},
		{"/api/templates/sweep/fleet?limit=0", "limit", http.StatusBadRequest},
		{"/api/templates/sweep/fleet?offset=-1", "offset", http.StatusBadRequest},
	} {
		code, m := f.do(t, "GET", c.path, "", "")
		if e, _ := m["error"].(string); code != c.code || !strings.Contains(e, c.want) {
			t.Errorf("%s: %d %v, want %d %q", c.path, code, m, c.code, c.want)
		}
	}
}
