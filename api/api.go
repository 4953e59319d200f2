// Package api is outerloop's HTTP JSON API: health, metrics, items with their attempts,
// decisions, deliveries and events, an attempt's patch (text/x-diff), escalations, templates,
// experiments with their reports (package evals), and the actions a person or a system takes (enqueue, resolve, steer, CI evidence). Reads are
// open; actions need the API token (see Auth), except a template's trigger endpoint, which its
// own secret authenticates (trigger.go).
// The CLI and the web console call the same operations (scheduler.Queue), so an action has one
// code path whichever door it comes through.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"outerloop/fleet"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// MaxBody caps request bodies (an oversized payload is refused, not truncated).
const MaxBody = 64 << 10

// Options configures the API.
type Options struct {
	Queue    *scheduler.Queue
	Auth     *Auth
	Metrics  http.Handler // /metrics
	Evidence http.Handler // POST /api/evidence (verify.EvidenceHandler), optional
	// EvidenceFiles serves GET /api/items/{id}/attempts/{n}/evidence[/{name}]
	// (verify.EvidenceFilesHandler), optional.
	EvidenceFiles http.Handler
	Logger        *slog.Logger
	// NextRun reports a template's next scheduled run (for /api/templates), optional.
	NextRun func(template string) (time.Time, bool)
	// Fleet is the gate of fleet templates (GET /api/templates/{name}/fleet reads its
	// repositories and usage), optional: without it a fleet shows its configured repositories.
	Fleet *fleet.Gate
	// Audit is the audit list (GET /api/audit; Handler records into it), optional.
	Audit *AuditLog
	// Experiments serves GET /api/experiments[/{id}] (experiments.go), optional: without it
	// those routes are not registered (404).
	Experiments Experiments
	// Triggers counts the trigger endpoint's requests (trigger.go), optional.
	Triggers TriggerObserver
	// Clock is the clock signed trigger requests' timestamps are checked against (default the
	// system clock).
	Clock workitems.Clock
	// Getenv reads the environment variables holding templates' trigger secrets (default
	// os.Getenv), read at each request.
	Getenv func(string) string
}

// Server serves the API.
type Server struct {
	o      Options
	store  *itemstore.Store
	closed chan struct{} // Close: long polls answer now
	once   sync.Once
}

// longPollSlice is the longest one blocking read of a long poll waits: between reads the poll
// notices Close (a blocking Redis read notices neither a cancelled context nor Close).
const longPollSlice = 2 * time.Second

// Close makes the long polls under way answer with what they have (within longPollSlice), so
// that http.Server.Shutdown, which waits for running handlers, is not held up by them: register
// it with srv.RegisterOnShutdown. Everything else keeps working.
func (s *Server) Close() { s.once.Do(func() { close(s.closed) }) }

// New returns the API server; Register adds its routes to a mux shared with the console.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Auth == nil {
		o.Auth = NewAuth("")
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	return &Server{o: o, store: o.Queue.Store(), closed: make(chan struct{})}
}

func (s *Server) clock() workitems.Clock { return s.o.Clock }

// Register adds the API routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.health)
	if s.o.Metrics != nil {
		mux.Handle("GET /metrics", s.o.Metrics)
	}
	mux.HandleFunc("GET /api/items", s.listItems)
	mux.HandleFunc("POST /api/items", s.mutating(s.createItem))
	mux.HandleFunc("GET /api/items/{id}", s.getItem)
	mux.HandleFunc("GET /api/items/{id}/events", s.events)
	mux.HandleFunc("GET /api/items/{id}/diff", s.diff)
	mux.HandleFunc("POST /api/items/{id}/resolve", s.mutating(s.resolve))
	mux.HandleFunc("POST /api/items/{id}/steer", s.mutating(s.steer))
	mux.HandleFunc("GET /api/escalations", s.escalations)
	mux.HandleFunc("GET /api/templates", s.templates)
	s.registerTemplates(mux)   // templates.go: pause, resume, run, rerun, history
	s.registerExperiments(mux) // experiments.go: the eval namespace's experiments and reports
	if s.o.Audit != nil {
		mux.HandleFunc("GET /api/audit", s.auditList)
	}
	if s.o.Evidence != nil {
		mux.Handle("POST /api/evidence", s.o.Evidence)
	}
	if s.o.EvidenceFiles != nil {
		mux.Handle("GET /api/items/{id}/attempts/{n}/evidence", s.o.EvidenceFiles)
		mux.Handle("GET /api/items/{id}/attempts/{n}/evidence/{name}", s.o.EvidenceFiles)
	}
}

// Handler returns the API behind Protect (the access gate and the audit recorder).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Register(mux)
	return Protect(mux, ProtectOptions{Auth: s.o.Auth, Audit: s.o.Audit, Logger: s.o.Logger})
}

// Error is the JSON body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, Error{Error: fmt.Sprintf(format, args...)})
}

// statusOf maps store errors to HTTP statuses.
func statusOf(err error) int {
	var ce *config.ConfigError
	switch {
	case errors.Is(err, workitems.ErrNotFound), errors.Is(err, scheduler.ErrUnknownTemplate), errors.Is(err, itemstore.ErrNoPatch):
		return http.StatusNotFound
	case errors.Is(err, workitems.ErrInvalidTransition), errors.Is(err, workitems.ErrExists), errors.Is(err, itemstore.ErrMaxOpen),
		errors.Is(err, itemstore.ErrNotSteerable):
		return http.StatusConflict
	case errors.Is(err, itemstore.ErrNoChange), errors.As(err, &ce), errors.Is(err, scheduler.ErrInvalidUTF8):
		return http.StatusUnprocessableEntity
	case errors.Is(err, itemstore.ErrDailyCap):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

type ctxKey struct{}

// ActorFrom returns the authorised actor of a mutating request.
func ActorFrom(ctx context.Context) string { return PrincipalFrom(ctx).Actor }

// PrincipalFrom returns who a mutating request acts as (zero outside one).
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(ctxKey{}).(Principal)
	return p
}

// mutating guards an action: body size, token, actor.
func (s *Server) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBody {
			tooLarge(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		if !s.o.Auth.CanAct() {
			writeErr(w, http.StatusForbidden, "actions are disabled: the server has no operator token (set OUTERLOOP_API_TOKEN or an operator in OUTERLOOP_TOKENS_FILE)")
			return
		}
		p, err := s.o.Auth.Authorize(r, RoleOperator)
		if err != nil {
			refuse(w, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
	}
}

// tooLarge refuses a body declared larger than MaxBody with 413. It reads (and drops) a bounded
// part of the body first, so that a client still sending gets the answer instead of a broken
// pipe, and closes the connection after it.
func tooLarge(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	_, _ = io.CopyN(io.Discard, r.Body, maxDrain)
	writeErr(w, http.StatusRequestEntityTooLarge, "body larger than %d bytes", MaxBody)
}

// maxDrain bounds what tooLarge reads of a refused body.
const maxDrain = 16 << 20

// errTooLarge is a body that ran past MaxBody while being read (no or a false Content-Length).
var errTooLarge = fmt.Errorf("body larger than %d bytes", MaxBody)

// decodeStatus is the status of a decode error: 413 for a body too large, 408 for one that did
// not arrive in time (BoundBodies), else 400.
func decodeStatus(err error) int {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case bodyTimedOut(err):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// decode reads a JSON body strictly: unknown fields, trailing data and text that is not UTF-8
// (raw bytes, or an unpaired surrogate escape) are errors; encoding/json would silently turn
// such text into U+FFFD.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		return fmt.Errorf("body could not be read: %w", err)
	}
	if !utf8.Valid(body) {
		return errors.New("body is not valid UTF-8")
	}
	if at := loneSurrogate(body); at >= 0 {
		return fmt.Errorf("body has an unpaired UTF-16 surrogate escape at byte %d: not valid UTF-8 text", at)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body is not the expected JSON: %w", err)
	}
	if dec.More() {
		return errors.New("body has data after the JSON object")
	}
	return nil
}

// loneSurrogate returns the offset of the first \uXXXX escape of a UTF-16 surrogate that is not
// half of a pair, or -1.
func loneSurrogate(b []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(v), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // an escape of one character (\\, \", \n...): skip it
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(i + 6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return i
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		}
		i += 5
	}
	return -1
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Redis().Ping(ctx).Err(); err != nil {
		writeErr(w, http.StatusServiceUnavailable, "redis: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) listItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := itemstore.ListOptions{State: workitems.State(q.Get("state")), Template: q.Get("template")}
	if o.State != "" && !o.State.Valid() {
		writeErr(w, http.StatusBadRequest, "state %q is not one of %v", o.State, workitems.AllStates())
		return
	}
	o.Sort = itemstore.ListSort(q.Get("sort"))
	if !o.Sort.Valid() {
		writeErr(w, http.StatusBadRequest, "sort %q: want newest, oldest or spend", o.Sort)
		return
	}
	var ok bool
	if o.Offset, o.Limit, ok = pageParams(w, r); !ok {
		return
	}
	items, err := s.store.List(r.Context(), o)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if items == nil {
		items = []*workitems.Item{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// ItemView is an item with its event log.
type ItemView struct {
	*workitems.Item
	Events []workitems.Event `json:"events"`
	// RunningSpend is what the running attempt has been charged so far (its wall time
	// advances every few seconds while it runs); absent unless the item is running.
	RunningSpend *workitems.Spend `json:"running_spend,omitempty"`
	// NextPoll is when the poller looks at a waiting item next, as its index says (a forge's
	// rate limit or a claim moves it past wait.next_poll); absent unless the item is waiting.
	NextPoll *time.Time `json:"next_poll,omitempty"`
	// ReviewRounds are the reviews that requested changes and sent the item into another
	// attempt, read from its decisions (ReviewRounds).
	ReviewRounds []ReviewRound `json:"review_rounds,omitempty"`
}

func (s *Server) getItem(w http.ResponseWriter, r *http.Request) {
	it, err := s.store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	evs, err := s.store.Events(r.Context(), it.ID, "", 2000, 0)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	view := ItemView{Item: it, Events: evs, ReviewRounds: ReviewRounds(it)}
	if it.State == workitems.StateRunning {
		if sp, err := s.store.ChargedSpend(r.Context(), it.ID, it.Attempt); err == nil {
			view.RunningSpend = &sp
		}
	}
	if it.State == workitems.StateWaiting {
		if np, err := s.store.NextPoll(r.Context(), it.ID); err == nil && !np.IsZero() {
			view.NextPoll = &np
		}
	}
	writeJSON(w, http.StatusOK, view)
}

// events returns events after ?after=ID, waiting up to ?wait=30s for new ones (long poll).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.Get(r.Context(), id); err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			writeErr(w, http.StatusBadRequest, "wait %q: want a duration up to 1m", v)
			return
		}
		wait = d
	}
	evs, err := s.waitEvents(r.Context(), id, r.URL.Query().Get("after"), wait)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if evs == nil {
		evs = []workitems.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// waitEvents reads the events after after, waiting up to wait for some in reads of at most
// longPollSlice, and answers early when the client went or the server is closing.
func (s *Server) waitEvents(ctx context.Context, id, after string, wait time.Duration) ([]workitems.Event, error) {
	for {
		block := min(wait, longPollSlice)
		select {
		case <-s.closed:
			block = 0 // what there is, without waiting
		default:
		}
		evs, err := s.store.Events(ctx, id, after, 500, block)
		wait -= block
		if err != nil || len(evs) > 0 || block == 0 || wait <= 0 || ctx.Err() != nil {
			return evs, err
		}
	}
}

// DiffAttempt says which attempt's patch GET /api/items/{id}/diff serves: ?attempt=N, else the
// attempt of the item's latest delivery (0 and no error: the item has none).
func DiffAttempt(it *workitems.Item, param string) (int, error) {
	if param != "" {
		n, err := strconv.Atoi(param)
		if err != nil || n < 1 || n > it.Attempt {
			return 0, fmt.Errorf("attempt %q: want a number from 1 to %d", param, it.Attempt)
		}
		return n, nil
	}
	if it.Delivery == nil {
		return 0, nil
	}
	return it.Delivery.Attempt, nil
}

// diff serves an attempt's stored patch as text/x-diff (PatchHeader says when it was cut).
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	it, err := s.store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	n, err := DiffAttempt(it, r.URL.Query().Get("attempt"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	if n == 0 {
		writeErr(w, http.StatusNotFound, "item %s has no delivered change", it.ID)
		return
	}
	patch, err := s.store.Patch(r.Context(), it.ID, n)
	if err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/x-diff; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff") // the patch is the attempt's text, never a page
	h.Set(AttemptHeader, strconv.Itoa(n))
	for _, a := range it.Attempts {
		if a.N == n && a.Delivery != nil {
			h.Set(CommitHeader, a.Delivery.Commit)
			if a.Delivery.PatchTruncated {
				h.Set(TruncatedHeader, fmt.Sprintf("%d of %d bytes", len(patch), a.Delivery.PatchBytes))
			}
		}
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(patch)
}

// Headers of GET /api/items/{id}/diff.
const (
	AttemptHeader   = "X-Outerloop-Attempt"         // the attempt whose patch this is
	CommitHeader    = "X-Outerloop-Commit"          // the delivery commit the patch leads to
	TruncatedHeader = "X-Outerloop-Patch-Truncated" // set when the stored patch was cut at the bound
)

// CreateRequest is the body of POST /api/items.
type CreateRequest struct {
	Template string `json:"template"`
	Input    string `json:"input,omitempty"`
	Force    bool   `json:"force,omitempty"` // past the template's max_open (recorded with the actor)
}

func (s *Server) createItem(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	if req.Template == "" {
		writeErr(w, http.StatusBadRequest, "template: missing")
		return
	}
	it, err := s.o.Queue.Submit(r.Context(), scheduler.Request{Template: req.Template, Input: req.Input, Force: req.Force,
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: ActorFrom(r.Context())}})
	if err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, it)
}

// ResolveRequest is the body of POST /api/items/{id}/resolve.
type ResolveRequest struct {
	Action     string       `json:"action"` // close | retry | cancel
	Input      string       `json:"input,omitempty"`
	Budget     BudgetValues `json:"budget,omitempty"`      // per-attempt caps for the retry, by kind
	ItemBudget BudgetValues `json:"item_budget,omitempty"` // raised item caps, by kind
	Actor      string       `json:"actor,omitempty"`       // overrides the authenticated actor's name
}

// ParseBudget turns {kind: value} into a Budget, naming a bad kind or value.
func ParseBudget(m map[string]float64) (workitems.Budget, error) {
	var b workitems.Budget
	for k, v := range m {
		if err := b.Set(workitems.BudgetKind(k), v); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Resolution turns a request into a store resolution, validating it.
func (req ResolveRequest) Resolution(actor string) (workitems.Resolution, error) {
	action := workitems.ResolutionAction(req.Action)
	if !slices.Contains(workitems.AllResolutionActions(), action) {
		return workitems.Resolution{}, fmt.Errorf("action %q: want one of %v", req.Action, workitems.AllResolutionActions())
	}
	b, err := ParseBudget(req.Budget)
	if err != nil {
		return workitems.Resolution{}, err
	}
	ib, err := ParseBudget(req.ItemBudget)
	if err != nil {
		return workitems.Resolution{}, fmt.Errorf("item_budget: %w", err)
	}
	if action != workitems.ResolveRetry && (req.Input != "" || !b.IsZero() || !ib.IsZero()) {
		return workitems.Resolution{}, fmt.Errorf("input and budgets go with retry, not %s", req.Action)
	}
	if req.Actor != "" {
		actor = req.Actor
	}
	return workitems.Resolution{Action: action, Actor: actor, Input: strings.TrimSpace(req.Input), Budget: b, ItemBudget: ib}, nil
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	var req ResolveRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	if !PrincipalFrom(r.Context()).Shared {
		req.Actor = "" // a personal token's actor is its own name
	}
	res, err := req.Resolution(ActorFrom(r.Context()))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	AuditDetail(r.Context(), string(res.Action))
	it, err := s.o.Queue.Resolve(r.Context(), r.PathValue("id"), res)
	if err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	s.o.Logger.Info("item resolved", "item", it.ID, "action", res.Action, "actor", res.Actor, "state", it.State)
	writeJSON(w, http.StatusOK, it)
}

// SteerRequest is the body of POST /api/items/{id}/steer.
type SteerRequest struct {
	Text string `json:"text"`
}

func (s *Server) steer(w http.ResponseWriter, r *http.Request) {
	var req SteerRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, decodeStatus(err), "%v", err)
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeErr(w, http.StatusBadRequest, "text: missing")
		return
	}
	if err := s.o.Queue.Steer(r.Context(), r.PathValue("id"), req.Text, ActorFrom(r.Context())); err != nil {
		writeErr(w, statusOf(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "queued"})
}

// pageParams reads ?offset= and ?limit= (1..1000, default 100); on bad input it has answered
// 400 and returns false.
func pageParams(w http.ResponseWriter, r *http.Request) (offset, limit int, ok bool) {
	q := r.URL.Query()
	limit = 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeErr(w, http.StatusBadRequest, "limit %q: want 1..1000", l)
			return 0, 0, false
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, "offset %q: want a number ≥ 0", v)
			return 0, 0, false
		}
		offset = n
	}
	return offset, limit, true
}

func (s *Server) escalations(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	items, err := s.store.Escalated(r.Context(), offset, limit)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if items == nil {
		items = []*workitems.Item{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"escalations": items})
}

// TemplateView is a template with today's spend and its next run.
type TemplateView struct {
	Name            string    `json:"name"`
	Schedule        string    `json:"schedule,omitempty"`
	NextRun         time.Time `json:"next_run,omitzero"`
	Loop            string    `json:"loop"`
	Goal            string    `json:"goal"`
	DailyCostUSD    float64   `json:"daily_cost_usd"`
	DailyCostCapUSD float64   `json:"daily_cost_cap_usd,omitempty"`
	Open            int64     `json:"open"`
	// Paused is the template's pause (templates.go), absent when it runs on schedule.
	Paused *scheduler.Pause `json:"paused,omitempty"`
}

func (s *Server) templates(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	all := s.o.Queue.Config().Templates
	page := all[min(offset, len(all)):min(offset+limit, len(all))]
	names := make([]string, 0, len(page))
	for _, t := range page {
		names = append(names, t.Name)
	}
	stats, err := s.store.TemplateStats(r.Context(), names) // one pipeline for the page
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	pauses, err := s.o.Queue.Pauses(r.Context(), names) // one more pipeline
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	out := []TemplateView{}
	for _, t := range page {
		v := TemplateView{Name: t.Name, Schedule: t.Schedule, Loop: string(t.Loop.Kind), Goal: t.Goal, DailyCostCapUSD: t.DailyCostCapUSD}
		v.DailyCostUSD, v.Open = stats[t.Name].DailyCostUSD, stats[t.Name].Open
		if s.o.NextRun != nil {
			v.NextRun, _ = s.o.NextRun(t.Name)
		}
		if p, ok := pauses[t.Name]; ok {
			v.Paused = &p
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": out})
}
