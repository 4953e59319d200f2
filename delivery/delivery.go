package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// DefaultMaxPatchBytes bounds the patch kept with an item (Options.MaxPatchBytes).
const DefaultMaxPatchBytes = 1 << 20

// EventSink records an event on the item's log (the worker's sink fills in item and attempt).
type EventSink interface {
	Emit(ctx context.Context, e workitems.Event)
}

// Publisher takes a committed change to a forge: push the branch, open or update its pull
// request, wait for the required CI checks on exactly the pushed commit, merge when automerge
// is set. Package publish implements it over package forge (internal/app wires it when forges:
// has entries); NotConfigured stands in without forges.
//
// Errors carry a workitems error class (workitems.Classify): transient ones make the worker try
// the delivery again later without costing an attempt; any other class escalates the item at
// once with the error as the cause.
type Publisher interface {
	Publish(ctx context.Context, p Publication) (Published, error)
	// Merge merges the delivery's pull request (deliver.automerge) if its head is still the
	// pushed commit. A refusal by the forge is a *MergeRefusedError.
	Merge(ctx context.Context, m Merge) (workitems.Delivery, error)
	// Followup is told the decision on an attempt that did not close an item which already has
	// a branch or pull request from an earlier attempt (Followup.Delivery): a retry's next
	// attempt will push to the same branch, so its pull request updates; an escalation should
	// label the pull request `outerloop:needs-human` and comment the reason.
	Followup(ctx context.Context, f Followup) error
	// Withdraw is told an attempt found nothing to change: the branch's open pull request is
	// no longer needed (closed, or only commented when people hold it). A record without an
	// outcome: there was nothing to withdraw.
	Withdraw(ctx context.Context, w Withdrawal) (workitems.Delivery, error)
	// Ready marks a draft pull request ready for review (deliver.draft_until held).
	Ready(ctx context.Context, r Ready) (workitems.Delivery, error)
	// Cleanup is told a delivery's pull request was merged or closed: its branch goes, unless
	// the template keeps it or a person committed to it. Safe to call more than once.
	Cleanup(ctx context.Context, c Cleanup) error
}

// Withdrawal is an attempt of a forge template that found nothing to change.
type Withdrawal struct {
	Template  *config.Template
	Item      *workitems.Item
	Attempt   int
	Workspace string
	GitDir    string
	Events    EventSink
}

// Ready is a delivery whose draft pull request's condition holds.
type Ready struct {
	Template *config.Template
	Item     *workitems.Item
	Attempt  int
	Delivery workitems.Delivery
	Why      string // what made it ready, for the event
	Events   EventSink
}

// Cleanup is a delivery whose pull request ended.
type Cleanup struct {
	Template *config.Template
	Item     *workitems.Item
	Attempt  int
	Delivery workitems.Delivery
	Events   EventSink
}

// Merge is a decided close whose pull request is to be merged.
type Merge struct {
	Template *config.Template
	Item     *workitems.Item
	Attempt  int
	Delivery workitems.Delivery // the pushed commit and its pull request
	Events   EventSink
}

// MergeRefusedError is a merge the forge refused (the head moved, conflicts, a required check or
// approval it wants): a fact for the policy (automerge_refused), not transient trouble.
type MergeRefusedError struct{ Err error }

func (e *MergeRefusedError) Error() string { return "merge refused: " + e.Err.Error() }
func (e *MergeRefusedError) Unwrap() error { return e.Err }

// Publication is a committed change to publish.
type Publication struct {
	Template *config.Template // Template.Deliver says where and how
	// Item is the item before this decision; Item.Delivery is the previous attempt's record,
	// whose branch and pull request this attempt updates.
	Item      *workitems.Item
	Attempt   int
	Workspace string
	// GitDir holds the commit (Request.GitDir); "": the workspace's own .git.
	GitDir string
	// Delivery has mode, base, commit, tree and files filled in.
	Delivery workitems.Delivery
	// Decision is the verifier's close of the local evidence.
	Decision workitems.Decision
	Events   EventSink
	// NetworkRefused: see Request.
	NetworkRefused []string
}

// Published is what the publisher did: facts, never a decision. Delivery is the publication's
// record with branch, pushed SHA, pull request and the outcome (pushed, pr_opened, pr_updated;
// declined or unchanged with SameAs when a pull request already holds the tree; failed with
// class conflict when the base moved under a conflicting change).
type Published struct {
	Delivery workitems.Delivery
}

// Followup is a decision to tell the forge about.
type Followup struct {
	Template *config.Template
	Item     *workitems.Item
	Attempt  int
	Decision workitems.Decision
	Delivery workitems.Delivery // the item's latest delivery: branch, pull request
	Events   EventSink
}

// ErrForgeNotConfigured is the cause when a template delivers through a forge and none is wired.
var ErrForgeNotConfigured = errors.New("forge delivery not configured")

// NotConfigured is the Publisher used until a forge is wired: it refuses every publication with
// ErrForgeNotConfigured (class invalid_input: a person must configure it) and has nothing to
// follow up.
type NotConfigured struct{}

// Merge refuses: nothing was ever published.
func (NotConfigured) Merge(_ context.Context, m Merge) (workitems.Delivery, error) {
	return m.Delivery, workitems.Classify(workitems.ClassInvalidInput, fmt.Errorf("delivery: merge: %w", ErrForgeNotConfigured))
}

// Publish refuses.
func (NotConfigured) Publish(_ context.Context, p Publication) (Published, error) {
	return Published{}, workitems.Classify(workitems.ClassInvalidInput,
		fmt.Errorf("delivery: template %q: deliver.mode %s needs a forge: %w", p.Template.Name, p.Delivery.Mode, ErrForgeNotConfigured))
}

// Followup has nothing to do: nothing was ever published.
func (NotConfigured) Followup(context.Context, Followup) error { return nil }

// Withdraw has nothing to withdraw.
func (NotConfigured) Withdraw(context.Context, Withdrawal) (workitems.Delivery, error) {
	return workitems.Delivery{}, nil
}

// Ready has no pull request to mark.
func (NotConfigured) Ready(_ context.Context, r Ready) (workitems.Delivery, error) {
	return r.Delivery, nil
}

// Cleanup has no branch to delete.
func (NotConfigured) Cleanup(context.Context, Cleanup) error { return nil }

// Options configures a Deliverer.
type Options struct {
	Publisher     Publisher       // branch and pull_request modes (default NotConfigured)
	MaxPatchBytes int64           // bound of the stored patch (default DefaultMaxPatchBytes)
	Clock         workitems.Clock // times the delivery record (default the system clock)
	Logger        *slog.Logger
}

// Deliverer turns verified attempts into delivered changes. Its zero value is not usable; call New.
type Deliverer struct {
	o Options
}

// New returns a Deliverer.
func New(o Options) *Deliverer {
	if o.Publisher == nil {
		o.Publisher = NotConfigured{}
	}
	if o.MaxPatchBytes <= 0 {
		o.MaxPatchBytes = DefaultMaxPatchBytes
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Deliverer{o: o}
}

// Request is one decided attempt.
type Request struct {
	Template  *config.Template
	Item      *workitems.Item // before the decision is recorded
	Attempt   int
	Workspace string // the attempt's workspace: the work tree
	// GitDir is the work tree's git directory when the worker keeps it apart
	// (proc.WorkspaceGitDir): the commit, the patch and the push use it, and never read the
	// work tree's .git, whose config, attributes and hooks the item's commands could write.
	// "": the work tree's own .git (a repository nothing untrusted ran in).
	GitDir   string
	Base     string // the commit the attempt started from
	Decision workitems.Decision
	Verdict  *workitems.Verdict
	Events   EventSink
	// NetworkRefused lists the connections the sandbox refused to the attempt's commands
	// ("host:port (reason)"); the pull request's body names them.
	NetworkRefused []string
	// Delivered is the template's last delivered patch as the caller read it
	// (itemstore.Store.LastDelivered; nil: none): a patch with the same tree on the same base
	// tree, made by another item, is nothing new (outcome unchanged, SameAs naming it).
	Delivered *itemstore.LastDelivered
}

// Result is what the delivery did: its record (facts for the policy, never a decision) and the
// patch to store with the decision.
type Result struct {
	Delivery *workitems.Delivery // nil: nothing delivered (the attempt did not close locally)
	Patch    []byte              // at most MaxPatchBytes plus the truncation marker
}

// Deliver delivers an attempt the local evidence closed (see the package doc): the commit, its
// patch, and through a forge the push and the pull request. A failure a person must look at
// is a record with outcome failed; the error is only for transient trouble, and the caller
// tries again later.
func (d *Deliverer) Deliver(ctx context.Context, r Request) (Result, error) {
	if r.Template == nil || r.Item == nil {
		return Result{}, workitems.Classify(workitems.ClassInvariantViolation, errors.New("delivery: request without template or item"))
	}
	if r.Events == nil {
		r.Events = discard{}
	}
	var res Result
	if r.Decision.Outcome != workitems.OutcomeClose {
		return res, nil
	}
	mode := r.Template.Deliver.Mode
	if mode == "" {
		mode = workitems.DeliverPatch
	}
	del := &workitems.Delivery{Attempt: r.Attempt, Mode: mode, Base: r.Base, At: d.o.Clock.Now().UTC()}
	res.Delivery = del
	if r.Decision.Rule == workitems.RuleNoChange {
		del.Outcome = workitems.DeliveryUnchanged
		d.emit(ctx, r, workitems.StepUnchanged, "the check passed and the attempt changed nothing: nothing committed", nil)
		return d.withdraw(ctx, r, res)
	}
	if r.Workspace == "" || r.Base == "" {
		return d.fail(ctx, r, res, workitems.ClassInvariantViolation, errors.New("delivery: no workspace with a base commit to commit in"))
	}
	author, err := workitems.ParseAuthor(r.Template.Deliver.Author)
	if err != nil {
		return d.fail(ctx, r, res, workitems.ClassInvalidInput, fmt.Errorf("delivery: deliver.author: %w", err))
	}
	g := git{dir: r.Workspace, gitDir: r.GitDir, env: []string{
		"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + author.Name, "GIT_COMMITTER_EMAIL=" + author.Email}}
	c, err := commitChange(ctx, g, r.Base, commitMessage(r), r.Item.ID, r.Attempt, reportExcludes(r.Template.DoneCheck.Reports))
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	if c.commit == "" {
		del.Outcome = workitems.DeliveryUnchanged
		d.emit(ctx, r, workitems.StepUnchanged, "nothing but the done check's reports changed: nothing committed", nil)
		return d.withdraw(ctx, r, res)
	}
	del.Commit, del.Tree, del.BaseTree = c.commit, c.tree, c.baseTree
	if c.reused {
		d.emit(ctx, r, workitems.StepReused, "the attempt's commit exists already (resumed): "+shorten.SHA(c.commit), map[string]string{"commit": c.commit})
	} else {
		d.emit(ctx, r, workitems.StepCommitted, "one commit on the base: "+shorten.SHA(c.commit), map[string]string{"commit": c.commit, "base": r.Base, "tree": c.tree})
	}
	files, err := changedFiles(ctx, g, del.Base, del.Commit)
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	del.FileCount = len(files)
	for _, f := range files {
		del.Added += f.Added
		del.Deleted += f.Deleted
	}
	if len(files) > workitems.MaxDeliveryFiles {
		files = files[:workitems.MaxDeliveryFiles]
	}
	del.Files = files
	patch, total, truncated, err := boundedPatch(ctx, g, del.Base, del.Commit, d.o.MaxPatchBytes)
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	res.Patch, del.PatchBytes, del.PatchTruncated = patch, total, truncated

	if !mode.NeedsForge() {
		del.Outcome = workitems.DeliveryPatched
		if l := r.Delivered; l != nil && l.Item != r.Item.ID && l.BaseTree == del.BaseTree && l.Tree == del.Tree {
			del.Outcome = workitems.DeliveryUnchanged
			del.SameAs = &workitems.DeliveryRef{Item: l.Item, Attempt: l.Attempt, Commit: l.Commit}
			d.emit(ctx, r, workitems.StepUnchanged, fmt.Sprintf("the result equals the patch item %s delivered (attempt %d, tree %s on base tree %s): nothing new",
				l.Item, l.Attempt, shorten.SHA(del.Tree), shorten.SHA(del.BaseTree)), map[string]string{"same_as": l.Item})
		}
		return res, nil
	}
	d.emit(ctx, r, workitems.StepPublish, "handing the commit to the forge ("+string(mode)+")", map[string]string{"mode": string(mode)})
	pub, err := d.o.Publisher.Publish(ctx, Publication{Template: r.Template, Item: r.Item, Attempt: r.Attempt, Workspace: r.Workspace, GitDir: r.GitDir,
		Delivery: *del, Decision: r.Decision, Events: r.Events, NetworkRefused: r.NetworkRefused})
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	if pub.Delivery.Outcome == "" {
		return d.fail(ctx, r, res, workitems.ClassInvariantViolation, errors.New("delivery: the publisher returned no outcome"))
	}
	*del = pub.Delivery
	del.Attempt, del.Mode = r.Attempt, mode
	return res, nil
}

// withdraw tells the publisher a forge template's attempt found nothing to change: an open pull
// request of its branch is obsolete.
func (d *Deliverer) withdraw(ctx context.Context, r Request, res Result) (Result, error) {
	if r.Template.Deliver.Mode != workitems.DeliverPullRequest {
		return res, nil
	}
	w, err := d.o.Publisher.Withdraw(ctx, Withdrawal{Template: r.Template, Item: r.Item, Attempt: r.Attempt, Workspace: r.Workspace,
		GitDir: r.GitDir, Events: r.Events})
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient || ctx.Err() != nil {
			return d.failOrRetry(ctx, r, res, err)
		}
		// Nothing to change stays the decision; the pull request is looked at by a person.
		d.emit(ctx, r, workitems.StepObsolete, "closing the obsolete pull request failed: "+err.Error(), map[string]string{"class": string(workitems.ClassOf(err))})
		return res, nil
	}
	if w.Outcome == "" {
		return res, nil
	}
	w.Attempt, w.Mode, w.Base, w.At = r.Attempt, r.Template.Deliver.Mode, r.Base, res.Delivery.At
	*res.Delivery = w
	return res, nil
}

// Ready marks a delivery's draft pull request ready (deliver.draft_until).
func (d *Deliverer) Ready(ctx context.Context, r Ready) (workitems.Delivery, error) {
	if r.Events == nil {
		r.Events = discard{}
	}
	return d.o.Publisher.Ready(ctx, r)
}

// Cleanup deletes an ended pull request's branch when it is outerloop's alone.
func (d *Deliverer) Cleanup(ctx context.Context, c Cleanup) error {
	if c.Events == nil {
		c.Events = discard{}
	}
	return d.o.Publisher.Cleanup(ctx, c)
}

// Merge merges a decided close's pull request through the publisher (deliver.automerge).
func (d *Deliverer) Merge(ctx context.Context, m Merge) (workitems.Delivery, error) {
	if m.Events == nil {
		m.Events = discard{}
	}
	return d.o.Publisher.Merge(ctx, m)
}

// failOrRetry returns a transient error for the caller to retry, and makes anything else an
// escalation.
func (d *Deliverer) failOrRetry(ctx context.Context, r Request, res Result, err error) (Result, error) {
	class := workitems.ClassOf(err)
	if class == workitems.ClassTransient || ctx.Err() != nil {
		d.emit(ctx, r, workitems.StepRetrying, "transient delivery error, tried again later (no attempt spent): "+err.Error(),
			map[string]string{"class": string(workitems.ClassTransient)})
		d.o.Logger.WarnContext(ctx, "delivery: transient error; the task is retried", "item", r.Item.ID, "attempt", r.Attempt, "err", err)
		return Result{}, workitems.Classify(workitems.ClassTransient, err)
	}
	return d.fail(ctx, r, res, class, err)
}

// fail records why the delivery failed on its record (the policy escalates it: delivery_failed).
func (d *Deliverer) fail(ctx context.Context, r Request, res Result, class workitems.ErrorClass, err error) (Result, error) {
	del := res.Delivery
	del.Outcome, del.Error, del.ErrorClass = workitems.DeliveryFailed, err.Error(), class
	d.emit(ctx, r, workitems.StepFailed, "delivery failed: "+err.Error(), map[string]string{"class": string(class)})
	d.o.Logger.WarnContext(ctx, "delivery failed", "item", r.Item.ID, "attempt", r.Attempt, "class", class, "err", err)
	return res, nil
}

// Followup tells the publisher about an escalation of an item whose change it delivered
// (f.Delivery: the latest record, with its branch or pull request). A failure is an event, not
// an error: the decision stands.
func (d *Deliverer) Followup(ctx context.Context, f Followup) {
	if f.Events == nil {
		f.Events = discard{}
	}
	if f.Decision.Outcome != workitems.OutcomeEscalate {
		return // a retry's next attempt pushes to the same branch: its pull request updates then
	}
	if f.Delivery.PR == nil && f.Delivery.Branch == "" {
		return
	}
	r := Request{Attempt: f.Attempt, Events: f.Events, Decision: f.Decision}
	err := d.o.Publisher.Followup(ctx, f)
	data := map[string]string{"outcome": string(r.Decision.Outcome)}
	if err != nil {
		data["class"] = string(workitems.ClassOf(err))
		d.emit(ctx, r, workitems.StepFollowup, "telling the forge about the "+string(r.Decision.Outcome)+" failed: "+err.Error(), data)
		return
	}
	d.emit(ctx, r, workitems.StepFollowup, "the forge was told about the "+string(r.Decision.Outcome), data)
}

func (d *Deliverer) emit(ctx context.Context, r Request, step workitems.DeliveryStep, msg string, data map[string]string) {
	if data == nil {
		data = map[string]string{}
	}
	data["step"] = string(step)
	r.Events.Emit(ctx, workitems.Event{Type: workitems.EventDelivery, Attempt: r.Attempt, Message: msg, Data: data})
}

// commitMessage is the delivery commit's message: the title, the evidence summary, the
// trailers.
func commitMessage(r Request) string {
	title := shorten.FirstLine(r.Template.Deliver.Title)
	if title == "" {
		goal := r.Item.Goal
		if strings.TrimSpace(goal) == "" {
			goal = r.Template.Goal
		}
		title = shorten.FirstLine(goal)
	}
	if title == "" {
		title = "outerloop: " + r.Template.Name
	}
	var b strings.Builder
	b.WriteString(shorten.OneLine(title, 100))
	b.WriteString("\n\n")
	dec := r.Decision
	fmt.Fprintf(&b, "Verified by outerloop (%s)", dec.Rule)
	if len(dec.Reasons) > 0 {
		b.WriteString(": " + shorten.OneLine(dec.Reasons[0], 0))
	}
	b.WriteString(".\n")
	if r.Verdict != nil && r.Verdict.Summary != "" {
		b.WriteString("Evidence: " + shorten.OneLine(r.Verdict.Summary, 0) + "\n")
	}
	fmt.Fprintf(&b, "\n%s: %s\n%s: %d\n", trailerItem, r.Item.ID, trailerAttempt, r.Attempt)
	return b.String()
}

type discard struct{}

func (discard) Emit(context.Context, workitems.Event) {}
