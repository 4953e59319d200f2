package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"outerloop/scheduler"
	"outerloop/scheduler/fleetview"
)

// Template controls: pause, resume, run now, re-run of an ended item, and a template's history
// and control log (and the trigger endpoint, trigger.go). Each action goes through scheduler.Queue (the CLI's and the console's path
// too) and records the authenticated actor.

// registerTemplates adds the template-control routes to mux.
func (s *Server) registerTemplates(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/templates/{name}/items", s.templateItems)
	mux.HandleFunc("GET /api/templates/{name}/controls", s.templateControls)
	mux.HandleFunc("GET /api/templates/{name}/fleet", s.templateFleet)
	mux.HandleFunc("POST /api/templates/{name}/pause", s.mutating(s.pauseTemplate))
	mux.HandleFunc("POST /api/templates/{name}/resume", s.mutating(s.resumeTemplate))
	mux.HandleFunc("POST /api/templates/{name}/run", s.mutating(s.runTemplate))
	mux.HandleFunc("POST /api/items/{id}/rerun", s.mutating(s.rerunItem))
	// Authenticated by the template's own trigger secret, not the API's tokens (trigger.go).
	mux.HandleFunc("POST /api/templates/{name}/trigger", s.trigger)
}

// PauseRequest is the body of POST /api/templates/{name}/pause (optional).
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// RunRequest is the body of POST /api/templates/{name}/run (optional).
type RunRequest struct {
	Input string `json:"input,omitempty"`
	// Force runs the template past its max_open (recorded on the item), as enqueue's force.
	Force bool `json:"force,omitempty"`
}

// ControlStatus maps the errors of template controls to HTTP statuses (others as statusOf).
func ControlStatus(err error) int {
	switch {
	case errors.Is(err, scheduler.ErrBadControl), errors.Is(err, fleetview.ErrNotFleet):
		return http.StatusBadRequest
	case errors.Is(err, scheduler.ErrAlreadyPaused), errors.Is(err, scheduler.ErrNotPaused):
		return http.StatusConflict
	case errors.Is(err, scheduler.ErrNoSchedule):
		return http.StatusUnprocessableEntity
	}
	return statusOf(err)
}

// decodeOptional is decode for a body that may be empty (then v stays as it is).
func decodeOptional(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decode(r, v)
}

func (s *Server) pauseTemplate(w http.ResponseWriter, r *http.Request) {
	var req PauseRequest
	if err := decodeOptional(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	p, err := s.o.Queue.Pause(r.Context(), r.PathValue("name"), ActorFrom(r.Context()), req.Reason)
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) resumeTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decodeOptional(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	p, err := s.o.Queue.Resume(r.Context(), r.PathValue("name"), ActorFrom(r.Context()))
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"resumed": r.PathValue("name"), "by": ActorFrom(r.Context()), "pause": p})
}

func (s *Server) runTemplate(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if err := decodeOptional(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	it, err := s.o.Queue.RunNow(r.Context(), r.PathValue("name"), ActorFrom(r.Context()), req.Input, req.Force)
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, it)
}

func (s *Server) rerunItem(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decodeOptional(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	it, err := s.o.Queue.Rerun(r.Context(), r.PathValue("id"), ActorFrom(r.Context()))
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, it)
}

// templateItems serves a page of a template's history, newest first (?offset=, ?limit= up to
// 1000, default 20), with its pause.
func (s *Server) templateItems(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("limit") == "" {
		limit = 20
	}
	h, err := s.o.Queue.History(r.Context(), r.PathValue("name"), offset, limit)
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// templateControls serves a template's control log, newest first (?limit= up to 100).
func (s *Server) templateControls(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.o.Queue.Config().Template(name); !ok {
		writeErr(w, http.StatusNotFound, "template %q: %v", name, scheduler.ErrUnknownTemplate)
		return
	}
	n := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > 100 {
			writeErr(w, http.StatusBadRequest, "limit %q: want 1..100", v)
			return
		}
		n = l
	}
	recs, err := s.o.Queue.Controls(r.Context(), name, n)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"controls": recs})
}

// templateFleet serves a page of a fleet template's repositories, sorted by repository
// (?offset=, ?limit= up to 1000, default 50), with its next run, pause, usage and the page's
// totals (package scheduler/fleetview). A template with one repository is 400.
func (s *Server) templateFleet(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("limit") == "" {
		limit = fleetview.DefaultLimit
	}
	v := &fleetview.Reader{Queue: s.o.Queue, Gate: s.o.Fleet, NextRun: s.o.NextRun}
	f, err := v.Page(r.Context(), r.PathValue("name"), offset, limit)
	if err != nil {
		writeErr(w, ControlStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}
