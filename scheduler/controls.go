package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// ControlAction is a person's control of a template.
type ControlAction string

// The template controls.
const (
	ControlPause  ControlAction = "pause"
	ControlResume ControlAction = "resume"
	ControlRunNow ControlAction = "run_now"
	ControlRerun  ControlAction = "rerun"
)

// ControlRecord is one entry of a template's control log: who did what, when. For run now and
// re-run, Item is the item created (and RerunOf the item re-run). The item's own origin and
// created event are its authoritative record; the log is the template's view of them.
type ControlRecord struct {
	Action   ControlAction `json:"action"`
	Template string        `json:"template"`
	Actor    string        `json:"actor"`
	Reason   string        `json:"reason,omitempty"`
	Item     string        `json:"item,omitempty"`
	RerunOf  string        `json:"rerun_of,omitempty"`
	At       time.Time     `json:"at"`
}

func (r ControlRecord) json() string {
	b, _ := json.Marshal(r) // only strings and a time
	return string(b)
}

// logControl appends r to its template's control log. A failure is logged, not returned: the
// item the control made records its actor by itself.
func (q *Queue) logControl(ctx context.Context, r ControlRecord) {
	k := q.keys().controls(r.Template)
	_, err := q.store.Redis().TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, k, r.json())
		p.LTrim(ctx, k, 0, controlLogLen-1)
		return nil
	})
	if err != nil {
		q.log.Warn("template control not logged", "template", r.Template, "action", r.Action, "err", err)
	}
}

// Controls returns up to n of a template's newest control records, newest first.
func (q *Queue) Controls(ctx context.Context, template string, n int) ([]ControlRecord, error) {
	if n <= 0 || n > controlLogLen {
		n = controlLogLen
	}
	vals, err := q.store.Redis().LRange(ctx, q.keys().controls(template), 0, int64(n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("scheduler: controls of %q: %w", template, err)
	}
	out := make([]ControlRecord, 0, len(vals))
	for _, v := range vals {
		var r ControlRecord
		if json.Unmarshal([]byte(v), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// RunNow creates an item of a template at once, as a manual tick: the same path as a manual
// enqueue (Submit, so the same limits: max_open refuses it with itemstore.ErrMaxOpen unless
// force, which the item records), with the actor as its origin, logged as a control. A paused
// template runs too (see pause.go).
func (q *Queue) RunNow(ctx context.Context, template, actor, input string, force bool) (*workitems.Item, error) {
	if err := checkControl(actor, ""); err != nil {
		return nil, err
	}
	if t, ok := q.Config().Template(template); ok && t.IsFleet() {
		return q.runFleetNow(ctx, t, actor, input)
	}
	it, err := q.Submit(ctx, Request{Template: template, Input: input, Force: force,
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: actor}})
	if err != nil {
		return nil, err
	}
	q.logControl(ctx, ControlRecord{Action: ControlRunNow, Template: template, Actor: actor, Item: it.ID, At: it.CreatedAt})
	q.log.Info("template run now", "template", template, "actor", actor, "item", it.ID)
	return it, nil
}

// Rerun creates a new item of an ended item's template with the same input (its first
// attempt's), under the template's current config, linked both ways (RerunOf / Reruns). It is
// refused, changing nothing, for an unknown item (workitems.ErrNotFound), an item still open
// (itemstore.ErrStillOpen: resolve or cancel it instead) and a template no longer configured
// (ErrUnknownTemplate). The daily cost cap applies, as to any manual request.
func (q *Queue) Rerun(ctx context.Context, id, actor string) (*workitems.Item, error) {
	if err := checkControl(actor, ""); err != nil {
		return nil, err
	}
	orig, err := q.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if orig.State.Open() {
		return nil, fmt.Errorf("scheduler: rerun %s: it is %s: %w", id, orig.State, itemstore.ErrStillOpen)
	}
	cfg := q.cfg.Load()
	t, ok := cfg.Template(orig.Template)
	if !ok {
		return nil, fmt.Errorf("scheduler: rerun %s: template %q: %w", id, orig.Template, ErrUnknownTemplate)
	}
	it := newItem(cfg, t, manualID(t.Name, q.clock.Now()), workitems.Origin{Kind: workitems.OriginRerun, Actor: actor},
		itemstore.RerunInput(orig))
	it.Ref, it.Repo = orig.Ref, orig.Repo // the same repository, from the same place
	if err := q.store.CreateRerun(ctx, id, it, itemstore.CreateLimits{DailyCostCap: t.DailyCostCapUSD}); err != nil {
		return nil, err
	}
	if err := q.EnqueueAttempt(ctx, it); err != nil {
		q.log.Warn("enqueue failed; reconcile will retry", "item", it.ID, "err", err)
	}
	q.logControl(ctx, ControlRecord{Action: ControlRerun, Template: t.Name, Actor: actor, Item: it.ID, RerunOf: id, At: it.CreatedAt})
	q.log.Info("item re-run", "item", id, "rerun", it.ID, "actor", actor)
	return it, nil
}

// HistoryEntry is one item on a template's history: its outcome, spend and pull request.
type HistoryEntry struct {
	ID        string                 `json:"id"`
	State     workitems.State        `json:"state"`
	Outcome   string                 `json:"outcome"` // the latest decision's outcome and rule, or the state
	Summary   string                 `json:"summary,omitempty"`
	Attempts  int                    `json:"attempts"`
	Spend     workitems.Spend        `json:"spend"`
	PR        *workitems.PullRequest `json:"pr,omitempty"`
	Origin    workitems.Origin       `json:"origin"`
	RerunOf   string                 `json:"rerun_of,omitempty"`
	Reruns    []string               `json:"reruns,omitempty"`
	CreatedAt time.Time              `json:"created_at"`
	UpdatedAt time.Time              `json:"updated_at"`
}

// History is a page of a template's items, newest first, with the template's pause.
type History struct {
	Template string         `json:"template"`
	Paused   *Pause         `json:"paused,omitempty"`
	Total    int            `json:"total"` // items of the template in the store
	Offset   int            `json:"offset"`
	Items    []HistoryEntry `json:"items"`
}

// MaxHistory bounds one page of History.
const MaxHistory = 1000

// History reads a page of a template's items, newest first, from the template's ordered index
// (one ZREVRANGE and one MGET for the page; beside them one ZCARD and one HGETALL for the
// pause): its cost is the page's, whatever the store holds. An unknown template is ErrUnknownTemplate.
func (q *Queue) History(ctx context.Context, template string, offset, limit int) (History, error) {
	if _, ok := q.cfg.Load().Template(template); !ok {
		return History{}, fmt.Errorf("scheduler: history of %q: %w", template, ErrUnknownTemplate)
	}
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, MaxHistory)
	offset = max(offset, 0)
	o := itemstore.ListOptions{Template: template, Limit: limit, Offset: offset}
	// The count and the pause are read beside the page, so the whole read takes the page's
	// two round trips.
	type side struct {
		total int
		pause *Pause
		err   error
	}
	sideCh := make(chan side, 1)
	go func() {
		var sd side
		if sd.total, sd.err = q.store.Count(ctx, o); sd.err == nil {
			sd.pause, sd.err = q.PauseOf(ctx, template)
		}
		sideCh <- sd
	}()
	items, err := q.store.List(ctx, o)
	sd := <-sideCh
	if err != nil {
		return History{}, err
	}
	if sd.err != nil {
		return History{}, sd.err
	}
	total, p := sd.total, sd.pause
	h := History{Template: template, Paused: p, Total: total, Offset: offset, Items: make([]HistoryEntry, 0, len(items))}
	for _, it := range items {
		h.Items = append(h.Items, historyEntry(it))
	}
	return h, nil
}

func historyEntry(it *workitems.Item) HistoryEntry {
	e := HistoryEntry{ID: it.ID, State: it.State, Outcome: string(it.State), Attempts: it.Attempt, Spend: it.Spend,
		Origin: it.Origin, RerunOf: it.RerunOf, Reruns: it.Reruns, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
	// The state says where it ended; what led there is the newest of the verifier's decisions
	// (its rule) and a person's resolutions (who).
	var d *workitems.Decision
	if n := len(it.Decisions); n > 0 {
		d = &it.Decisions[n-1]
		e.Summary = d.Summary
	}
	if n := len(it.Resolution); n > 0 && (d == nil || !it.Resolution[n-1].At.Before(d.At)) {
		e.Outcome += " by " + it.Resolution[n-1].Actor
	} else if d != nil && d.Rule != "" {
		e.Outcome += " (" + string(d.Rule) + ")"
	}
	if it.Escalation != nil && it.State == workitems.StateEscalated {
		e.Summary = it.Escalation.Reason
		if it.Escalation.Summary != "" {
			e.Summary += ": " + it.Escalation.Summary
		}
	}
	if it.Delivery != nil {
		e.PR = it.Delivery.PR
	}
	return e
}
