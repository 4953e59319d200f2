package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// config returns the config in force.
func (h *Handler) config() *config.Config {
	if h.o.CurrentConfig != nil {
		if c := h.o.CurrentConfig(); c != nil {
			return c
		}
	}
	return h.o.Config
}

// templateFor finds the template an item's attempt runs with. A template this process does not
// know, or knows in another version than the item was created under, first makes it reload its
// config (the file may be newer than this process's copy). A template still gone, or changed in
// a way the item cannot go on with (config.Incompatible), escalates the item with
// the reason in its headline: done is then true and the task is done.
func (h *Handler) templateFor(ctx context.Context, it *workitems.Item, log *slog.Logger) (tmpl *config.Template, done bool, err error) {
	cfg := h.config()
	tmpl, ok := cfg.Template(it.Template)
	stale := !ok || (it.Pin != nil && it.Pin.Template != cfg.TemplateVersion(it.Template))
	if stale && h.o.ReloadConfig != nil {
		if c := h.o.ReloadConfig(ctx); c != nil {
			cfg = c
			tmpl, ok = cfg.Template(it.Template)
		}
	}
	var reason workitems.ConfigChangeReason
	var summary string
	switch {
	case !ok:
		reason = workitems.ConfigTemplateRemoved
		summary = fmt.Sprintf("template %q is no longer configured (config %s); the item was created under config %s",
			it.Template, cfg.Version(), pinConfig(it))
	case it.State == workitems.StateQueued || it.State == workitems.StateRetryWait:
		// A running (resumed) attempt keeps going: it already runs with this template.
		if why := config.Incompatible(it.Pin, tmpl); len(why) > 0 {
			reason = workitems.ConfigTemplateIncompatible
			summary = fmt.Sprintf("template %q changed incompatibly since the item was created (%s; config %s → %s)",
				it.Template, strings.Join(why, ", "), pinConfig(it), cfg.Version())
		}
	}
	if reason == "" {
		if it.Repo != "" && tmpl.IsFleet() {
			tmpl = tmpl.ForRepo(it.Repo) // one repository of the fleet: its delivery and CI
		}
		return tmpl, false, nil
	}
	// The lease first: an execution of this attempt still running elsewhere (under an older
	// config) is not escalated under its feet; asynq tries the task again once it is free.
	fence, err := h.o.Store.AcquireLease(ctx, it.ID, it.Attempt, h.o.WorkerID+"/"+randomHex(4), h.o.LeaseTTL)
	if err != nil {
		return nil, true, err
	}
	defer func() { _ = h.o.Store.ReleaseLease(context.WithoutCancel(ctx), fence) }()
	d := h.precondition(ctx, it, it.Attempt, reason.Rule(), summary)
	if _, err := h.o.Store.EscalateConfigChange(ctx, fence, reason, d); err != nil {
		return nil, true, err
	}
	log.Warn("item escalated: its template does not fit the config in force", "template", it.Template,
		"reason", reason, "summary", summary)
	h.o.Observer.Decision(it.Template, workitems.ActorVerifier, workitems.OutcomeEscalate, reason.Rule(), it.ID)
	return nil, true, nil
}

func pinConfig(it *workitems.Item) string {
	if it.Pin == nil || it.Pin.Config == "" {
		return "unknown (before config versions)"
	}
	return it.Pin.Config
}
