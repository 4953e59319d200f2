package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"outerloop/evals"
)

// Experiments of the eval namespace (docs/evals.md): GET /api/experiments lists them, newest
// first, and GET /api/experiments/{id} serves one with its report, in the JSON of
// `outerloop eval report --json`, and its progress. Reads only: experiments are started and
// driven by `outerloop eval run`.

// Experiments is what the API and the console read of experiments; *evals.Runner is one.
type Experiments interface {
	// List returns a page of experiments, newest first, with their recorded runs, and the
	// total, without reading any run.
	List(ctx context.Context, offset, limit int) ([]evals.Listed, int64, error)
	// Status records the runs that ended and says where an experiment stands.
	Status(ctx context.Context, id string) (evals.Progress, error)
	// Report builds the report of an experiment from its recorded runs.
	Report(ctx context.Context, id string) (evals.Report, *evals.Experiment, error)
}

// ExperimentVariant is a variant as the API shows it: its name and the file its overlay came
// from. The overlay itself is left out: it is a template fragment (env, commands) that a viewer
// of the list has no need of, as GET /api/templates leaves templates' env out.
type ExperimentVariant struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
}

// ExperimentView is an experiment as GET /api/experiments lists it. Done counts the runs
// recorded as ended, Total every run (tasks × variants × repeat).
type ExperimentView struct {
	ID            string              `json:"id"`
	Suite         string              `json:"suite"`
	Tasks         int                 `json:"tasks"`
	Variants      []ExperimentVariant `json:"variants"`
	Repeat        int                 `json:"repeat"`
	BudgetUSD     float64             `json:"budget_usd,omitempty"`
	ConfigVersion string              `json:"config_version"`
	// Versions is what the experiment ran under, comparable across experiments (none for an
	// experiment made before they were recorded).
	Versions  *evals.Versions `json:"versions,omitempty"`
	Actor     string          `json:"actor,omitempty"`
	State     evals.State     `json:"state"`
	Reason    string          `json:"reason,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	EndedAt   time.Time       `json:"ended_at,omitzero"`
	Done      int             `json:"done"`
	Total     int             `json:"total"`
}

// NewExperimentView is e as the API lists it, with done runs recorded.
func NewExperimentView(e *evals.Experiment, done int) ExperimentView {
	v := ExperimentView{ID: e.ID, Suite: e.Suite.Name, Tasks: len(e.Suite.Tasks), Variants: make([]ExperimentVariant, 0, len(e.Variants)),
		Repeat: e.Repeat, BudgetUSD: e.BudgetUSD, ConfigVersion: e.ConfigVersion, Actor: e.Actor, State: e.State, Reason: e.Reason,
		CreatedAt: e.CreatedAt, EndedAt: e.EndedAt, Done: done, Total: e.Total()}
	for _, s := range e.Variants {
		v.Variants = append(v.Variants, ExperimentVariant{Name: s.Name, Source: s.Source})
	}
	if e.Versions.Config != "" {
		vs := e.Versions
		v.Versions = &vs
	}
	return v
}

// ExperimentDetail is the body of GET /api/experiments/{id}.
type ExperimentDetail struct {
	Experiment ExperimentView `json:"experiment"`
	// Progress is where the experiment stands (evals.Runner.Status); nil when it could not be
	// read, ProgressError saying why (an experiment whose templates no longer build over the
	// config in force still has its report).
	Progress      *evals.Progress `json:"progress"`
	ProgressError string          `json:"progress_error,omitempty"`
	// Report is exactly what `outerloop eval report ID --json` prints.
	Report evals.Report `json:"report"`
}

// ErrUnknownExperiment is LoadExperiment's error for an id the store does not have.
var ErrUnknownExperiment = errors.New("unknown experiment")

// LoadExperiment reads one experiment's progress and report as `eval report` does: Status
// first, which records the runs that ended since a driver last looked, so the report counts
// them. An unknown id is ErrUnknownExperiment, naming it.
func LoadExperiment(ctx context.Context, ex Experiments, id string) (*ExperimentDetail, error) {
	d := &ExperimentDetail{}
	pr, err := ex.Status(ctx, id)
	switch {
	case errors.Is(err, evals.ErrNotFound):
		return nil, fmt.Errorf("experiment %q: %w", id, ErrUnknownExperiment)
	case err != nil:
		d.ProgressError = err.Error()
	default:
		d.Progress = &pr
	}
	rep, e, err := ex.Report(ctx, id)
	if errors.Is(err, evals.ErrNotFound) {
		return nil, fmt.Errorf("experiment %q: %w", id, ErrUnknownExperiment)
	}
	if err != nil {
		return nil, err
	}
	done := 0
	for _, v := range rep.Variants {
		done += v.Runs
	}
	if d.Progress != nil {
		done = d.Progress.Done
	}
	d.Experiment, d.Report = NewExperimentView(e, done), rep
	return d, nil
}

// registerExperiments adds the experiment routes to mux when experiments are wired.
func (s *Server) registerExperiments(mux *http.ServeMux) {
	if s.o.Experiments == nil {
		return
	}
	mux.HandleFunc("GET /api/experiments", s.listExperiments)
	mux.HandleFunc("GET /api/experiments/{id}", s.getExperiment)
}

// listExperiments serves a page of experiments, newest first (?offset=, ?limit= up to 1000,
// default 20).
func (s *Server) listExperiments(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("limit") == "" {
		limit = 20
	}
	page, total, err := s.o.Experiments.List(r.Context(), offset, limit)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	out := make([]ExperimentView, 0, len(page))
	for _, l := range page {
		out = append(out, NewExperimentView(l.Experiment, l.Done))
	}
	writeJSON(w, http.StatusOK, map[string]any{"experiments": out, "total": total, "offset": offset, "limit": limit})
}

func (s *Server) getExperiment(w http.ResponseWriter, r *http.Request) {
	d, err := LoadExperiment(r.Context(), s.o.Experiments, r.PathValue("id"))
	if errors.Is(err, ErrUnknownExperiment) {
		writeErr(w, http.StatusNotFound, "%v", err)
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
