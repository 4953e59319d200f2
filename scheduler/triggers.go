package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Triggers makes items from the forge events templates subscribe to (a template's triggers:,
// workitems/config/triggers.go; docs/triggers.md). It is the waits.Sink's Triggers: the sink
// hands it every normalised webhook delivery.
//
//   - check_failed: a check event (commit status, check run) in state failure — not
//     infra_error (the CI system broke, not the code), not action_required (a person must act on
//     the forge), not cancelled — on the trigger's repository and the head of its branch, whose
//     check name is one of the trigger's checks (none listed: any). The branch is the event's
//     when the forge says it (GitHub's check_run and, for a commit on one branch, its status;
//     Gitea Actions' workflow_job and workflow_run); Gitea's commit status event does not say,
//     so the commit is compared with the branch's head read from the forge (Heads), and without
//     Heads such an event does not match. One item per (template, forge, repository, commit):
//     workitems.CheckTriggerItemID.
//   - labeled: a labeled event on an issue or a pull request (of the trigger's repository, when
//     it names one) whose labels hold the trigger's label. Gitea sends every label the issue has
//     at each change (hooks.Labeled.Current); the deterministic id makes that harmless. One item
//     per (template, forge, repository, number, label): workitems.LabelTriggerItemID.
//
// Items are made through Queue.SubmitTriggered, with origin webhook and actor "<forge>:<sender>",
// so the template's max_per_hour, max_open and daily cost cap apply; a refusal is logged, not
// returned. The id is created with the store's Create, which exactly one of any number of
// callers wins: a second failing check on the same commit, a replayed delivery and another
// replica handling the same delivery make no second item. A paused template makes no items.
// Trigger returns an error only for trouble worth another delivery (Redis, a forge that could
// not be read): the webhook handler then answers so that the forge delivers again.
type Triggers struct {
	q     *Queue
	cfg   func() *config.Config
	log   *slog.Logger
	heads BranchHeads
	obs   TriggerObserver
}

// TriggerObserver counts the firings of triggers by what became of them (metrics.Metrics).
type TriggerObserver interface {
	TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult)
}

// BranchHeads reads the commit a branch points at.
type BranchHeads interface {
	// BranchHead returns the head commit of branch in repo on the forge keyed forgeName, or ""
	// when the branch does not exist.
	BranchHead(ctx context.Context, forgeName, repo, branch string) (string, error)
}

// MaxTriggerText bounds an issue's body copied into an item's input, in bytes.
const MaxTriggerText = 8 << 10

// NewTriggers returns the Triggers of q's templates; cfg returns the config in force (nil:
// q.Config), so a reload's triggers apply from the next delivery.
func NewTriggers(q *Queue, cfg func() *config.Config, log *slog.Logger) *Triggers {
	if cfg == nil {
		cfg = q.Config
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Triggers{q: q, cfg: cfg, log: log}
}

// WithHeads sets how a check event that does not name its branch is matched to a trigger's
// branch (ForgeHeads: the forge's own branch); it returns t.
func (t *Triggers) WithHeads(h BranchHeads) *Triggers {
	t.heads = h
	return t
}

// WithObserver counts every firing on o; it returns t.
func (t *Triggers) WithObserver(o TriggerObserver) *Triggers {
	t.obs = o
	return t
}

// fired counts one firing (no observer: nothing).
func (t *Triggers) fired(template string, r workitems.TriggerResult) {
	if t.obs != nil {
		t.obs.TriggerFiring(template, workitems.TriggerSourceForge, r)
	}
}

// Trigger implements waits.Triggers: it makes the items of the templates whose triggers the
// event matches.
func (t *Triggers) Trigger(ctx context.Context, e hooks.Event) error {
	if e.Kind != hooks.KindCheck && e.Kind != hooks.KindLabeled {
		return nil
	}
	cfg := t.cfg()
	m := &matcher{t: t, e: e, heads: map[string]string{}}
	for i := range cfg.Templates {
		tm := &cfg.Templates[i]
		var reqs []Request
		for _, tr := range tm.Triggers {
			r, ok, err := m.match(ctx, tm, tr)
			if err != nil {
				return err
			}
			if ok && tm.IsFleet() {
				// A fleet's item works on the repository of the event, when it is one of its own.
				r.Repo, ok = t.q.fleetRepoOf(ctx, tm, e.Forge, e.Repo)
			}
			if ok && !slices.ContainsFunc(reqs, func(o Request) bool { return o.ID == r.ID }) {
				reqs = append(reqs, r)
			}
		}
		if len(reqs) == 0 {
			continue
		}
		p, err := t.q.PauseOf(ctx, tm.Name)
		if err != nil {
			return err
		}
		if p != nil {
			t.log.Info("trigger: template paused; no item", "template", tm.Name, "event", e.Kind, "repo", e.Repo,
				"delivery", e.DeliveryID, "paused_by", p.Actor)
			for range reqs {
				t.fired(tm.Name, workitems.TriggerPaused)
			}
			continue
		}
		for _, r := range reqs {
			if err := t.submit(ctx, r, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// submit makes one item; only trouble worth a redelivery is returned.
func (t *Triggers) submit(ctx context.Context, r Request, e hooks.Event) error {
	it, err := t.q.SubmitTriggered(ctx, r, workitems.TriggerSourceForge)
	attrs := []any{"template", r.Template, "item", r.ID, "event", e.Kind, "repo", e.Repo, "delivery", e.DeliveryID}
	switch {
	case err == nil:
		t.log.Info("trigger: item created", append(attrs, "actor", it.Origin.Actor)...)
		t.fired(r.Template, workitems.TriggerMade)
	case errors.Is(err, workitems.ErrExists):
		t.log.Debug("trigger: item exists", attrs...)
		t.fired(r.Template, workitems.TriggerDeduplicated)
	case errors.Is(err, itemstore.ErrMaxOpen), errors.Is(err, itemstore.ErrDailyCap), errors.Is(err, ErrTriggerCapped):
		t.log.Warn("trigger: no item, a limit refused it", append(attrs, "err", err)...)
		t.fired(r.Template, workitems.TriggerCapped)
	case errors.Is(err, ErrUnknownTemplate), workitems.ClassOf(err) == workitems.ClassInvalidInput:
		t.log.Warn("trigger: no item", append(attrs, "err", err)...)
		t.fired(r.Template, workitems.TriggerRefused)
	default:
		return fmt.Errorf("scheduler: trigger of %s: %w", r.Template, err)
	}
	return nil
}

// matcher matches one event against triggers, reading each branch head at most once.
type matcher struct {
	t     *Triggers
	e     hooks.Event
	heads map[string]string // forge\x00repo\x00branch → head
}

// match reports whether tr of template tm matches the event, and the request it makes.
func (m *matcher) match(ctx context.Context, tm *config.Template, tr config.Trigger) (Request, bool, error) {
	e := m.e
	if tr.Forge != e.Forge || (tr.Repo != "" && !strings.EqualFold(tr.Repo, e.Repo)) {
		return Request{}, false, nil
	}
	origin := workitems.Origin{Kind: workitems.OriginWebhook, Actor: e.Forge}
	if e.Sender != "" {
		origin.Actor += ":" + e.Sender
	}
	switch tr.Event {
	case workitems.TriggerCheckFailed:
		c := e.Check
		if e.Kind != hooks.KindCheck || c == nil || c.State != workitems.CheckFailure || e.SHA == "" ||
			(len(tr.Checks) > 0 && !slices.Contains(tr.Checks, c.Name)) {
			return Request{}, false, nil
		}
		on, err := m.onBranch(ctx, tr.Branch)
		if err != nil || !on {
			return Request{}, false, err
		}
		return Request{Template: tm.Name, ID: workitems.CheckTriggerItemID(tm.Name, e.Forge, e.Repo, e.SHA),
			Origin: origin, Input: checkInput(e, tr.Branch)}, true, nil
	case workitems.TriggerLabeled:
		l := e.Labeled
		if e.Kind != hooks.KindLabeled || l == nil || e.Number <= 0 ||
			!slices.ContainsFunc(l.Labels, func(s string) bool { return strings.EqualFold(s, tr.Label) }) {
			return Request{}, false, nil
		}
		return Request{Template: tm.Name, ID: workitems.LabelTriggerItemID(tm.Name, e.Forge, e.Repo, e.Number, tr.Label),
			Origin: origin, Input: labelInput(e, tr.Label)}, true, nil
	}
	return Request{}, false, nil
}

// onBranch reports whether the check event is on the head of branch: the event's own branch
// when the forge says it, else the branch's head read through Heads (none: no match).
func (m *matcher) onBranch(ctx context.Context, branch string) (bool, error) {
	e := m.e
	if e.Branch != "" {
		return e.Branch == branch, nil
	}
	if m.t.heads == nil {
		m.t.log.Debug("trigger: a check event without its branch, and no way to read the branch's head",
			"repo", e.Repo, "sha", e.SHA, "branch", branch)
		return false, nil
	}
	k := e.Forge + "\x00" + strings.ToLower(e.Repo) + "\x00" + branch
	head, ok := m.heads[k]
	if !ok {
		h, err := m.t.heads.BranchHead(ctx, e.Forge, e.Repo, branch)
		if err != nil {
			if workitems.ClassOf(err) == workitems.ClassTransient {
				return false, fmt.Errorf("scheduler: trigger: head of %s in %s: %w", branch, e.Repo, err)
			}
			m.t.log.Warn("trigger: the branch's head cannot be read; no item", "forge", e.Forge, "repo", e.Repo,
				"branch", branch, "err", err)
			return false, nil
		}
		head, m.heads[k] = h, h
	}
	return head != "" && strings.EqualFold(head, e.SHA), nil
}

// checkInput is the first attempt's input of a check_failed item: the event's facts.
func checkInput(e hooks.Event, branch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A CI check failed on branch %s of %s (forge %s), at commit %s.\n", branch, e.Repo, e.Forge, e.SHA)
	fmt.Fprintf(&b, "Check: %s\nState: %s\n", clean(e.Check.Name), e.Check.State)
	if e.Check.Summary != "" {
		fmt.Fprintf(&b, "Summary: %s\n", clean(e.Check.Summary))
	}
	if e.Check.URL != "" {
		fmt.Fprintf(&b, "Link: %s\n", clean(e.Check.URL))
	}
	return b.String()
}

// labelInput is the first attempt's input of a labeled item: the title and body
// (clipped to MaxTriggerText) and who changed its labels.
func labelInput(e hooks.Event, label string) string {
	what := "issue"
	if e.IsPR {
		what = "pull request"
	}
	l := e.Labeled
	var b strings.Builder
	fmt.Fprintf(&b, "The label %q is on %s #%d of %s (forge %s)", label, what, e.Number, e.Repo, e.Forge)
	if l.User != "" {
		fmt.Fprintf(&b, "; its labels were changed by %s", clean(l.User))
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "Title: %s\n", clean(l.Title))
	if body := shorten.ClipMarked(clean(l.Body), MaxTriggerText); body != "" {
		fmt.Fprintf(&b, "\nIts text, as its author wrote it:\n\n%s\n", body)
	}
	return b.String()
}

// clean makes forge text valid UTF-8 (Submit refuses anything else).
func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// ForgeHeads reads branch heads from the deployment's forges with git ls-remote (the forge's
// clone URL and credentials), bounded by a 30 s timeout.
type ForgeHeads forge.Set

// BranchHead implements BranchHeads.
func (fs ForgeHeads) BranchHead(ctx context.Context, forgeName, repo, branch string) (string, error) {
	f, err := forge.Set(fs).Get(forgeName)
	if err != nil {
		return "", err
	}
	r, err := f.Repository(ctx, repo)
	if err != nil {
		return "", err
	}
	auth, err := f.GitAuth(r.CloneURL)
	if err != nil {
		return "", err
	}
	return forge.RemoteBranch(ctx, forge.PushRequest{Forge: forgeName, URL: r.CloneURL, Branch: branch, Auth: auth,
		Timeout: 30 * time.Second})
}
