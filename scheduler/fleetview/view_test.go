package fleetview_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/fleet"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/scheduler/fleetview"
	"outerloop/scheduler/fleetview/viewtest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

func newReader(t *testing.T) (*fleetview.Reader, map[string]string) {
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
	ids := viewtest.Seed(t, q)
	next := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	return &fleetview.Reader{Queue: q, Gate: gate, NextRun: func(string) (time.Time, bool) { return next, true }}, ids
}

func TestFleetViewPagesRepositoriesInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, ids := newReader(t)
	f, err := r.Page(ctx, "sweep", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if f.Total != 3 || len(f.Rows) != 2 || f.Next == nil || *f.Next != 2 || f.NextRun.IsZero() {
		t.Fatalf("first page: %+v", f)
	}
	a := f.Rows[0]
	if a.Repo != viewtest.Repos[0] || a.Slug != "acme/a" || a.URL != "https://gitea.example.com/acme/a" ||
		a.Item != ids[viewtest.Repos[0]] || a.State != workitems.StateQueued || a.PR == nil || a.PR.Number != 7 ||
		a.CI.State != workitems.CheckFailure || a.CI.String() != "failure 1/2" || a.CostUSD != 1.25 {
		t.Fatalf("row a: %+v", a)
	}
	if f.Rows[1].Repo != viewtest.Repos[1] || f.Rows[1].PR != nil || f.Rows[1].CI.String() != "-" {
		t.Fatalf("row b: %+v", f.Rows[1])
	}
	if f.Totals.CostUSD != 1.25 || f.Totals.OpenPRs != 1 || f.Totals.Items != 2 {
		t.Fatalf("totals: %+v", f.Totals)
	}
	f, err = r.Page(ctx, "sweep", 2, 2)
	if err != nil || len(f.Rows) != 1 || f.Rows[0].Repo != viewtest.Repos[2] || f.Next != nil {
		t.Fatalf("last page: %+v %v", f, err)
	}
	if f, err = r.Page(ctx, "sweep", 9, 2); err != nil || len(f.Rows) != 0 || f.Total != 3 {
		t.Fatalf("past the end: %+v %v", f, err)
	}
}

func TestFleetViewRefusesUnknownAndSingleRepositoryTemplates(t *testing.T) {
	t.Parallel()
	r, _ := newReader(t)
	if _, err := r.Page(context.Background(), "nope", 0, 10); !errors.Is(err, scheduler.ErrUnknownTemplate) {
		t.Fatalf("unknown template: %v", err)
	}
	if _, err := r.Page(context.Background(), "single", 0, 10); !errors.Is(err, fleetview.ErrNotFleet) {
		t.Fatalf("single-repository template: %v", err)
	}
}

func TestFleetViewShowsConfiguredRepositoriesBeforeTheirFirstItem(t *testing.T) {
	t.Parallel()
	r, _ := newReader(t)
	cfg, err := config.ParseConfig([]byte(viewtest.YAML))
	if err != nil {
		t.Fatal(err)
	}
	sweep, _ := cfg.Template("sweep")
	sweep.Repos = append(sweep.Repos, "https://gitea.example.com/acme/d.git")
	r.Queue.SetConfig(cfg)
	f, err := r.Page(context.Background(), "sweep", 3, 10)
	if err != nil || f.Total != 4 || len(f.Rows) != 1 || f.Rows[0].Slug != "acme/d" || f.Rows[0].Item != "" {
		t.Fatalf("a repository without items: %+v %v", f, err)
	}
}
