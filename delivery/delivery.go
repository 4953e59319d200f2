package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"outerloop/workitems"
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
	// Followup is told the decision on an attempt that did not close an item which already has
	// a branch or pull request from an earlier attempt (Followup.Delivery): a retry's next
	// attempt will push to the same branch, so its pull request updates; an escalation should
	// label the pull request `outerloop:needs-human` and comment the reason.
	Followup(ctx context.Context, f Followup) error
}

// Publication is a committed change to publish.
type Publication struct {
	Template *workitems.Template // Template.Deliver says where and how
	// Item is the item before this decision; Item.Delivery is the previous attempt's record,
	// whose branch and pull request this attempt updates.
	Item      *workitems.Item
	Attempt   int
	Workspace string
	// Delivery has mode, base, commit, tree and files filled in.
	Delivery workitems.Delivery
	// Decision is the verifier's close of the local evidence.
	Decision workitems.Decision
	Events   EventSink
	// NetworkRefused: see Request.
	NetworkRefused []string
}

// Published is what the publisher did.
type Published struct {
	// Delivery is the publication's record with branch, pushed SHA, pull request, CI checks,
	// merge commit and the outcome (pushed, pr_opened, pr_updated, merged, declined, unchanged).
	Delivery workitems.Delivery
	// Decision, when set, replaces the verifier's close: CI on the pushed commit failed (retry
	// with the failing checks in the next input), the checks never came (escalate), a person
	// declined the same tree before (close, rule declined), the open pull request already holds
	// this tree (close as unchanged).
	Decision *workitems.Decision
}

// Followup is a decision to tell the forge about.
type Followup struct {
	Template *workitems.Template
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

// Publish refuses.
func (NotConfigured) Publish(_ context.Context, p Publication) (Published, error) {
	return Published{}, workitems.Classify(workitems.ClassInvalidInput,
		fmt.Errorf("delivery: template %q: deliver.mode %s needs a forge: %w", p.Template.Name, p.Delivery.Mode, ErrForgeNotConfigured))
}

// Followup has nothing to do: nothing was ever published.
func (NotConfigured) Followup(context.Context, Followup) error { return nil }

// Options configures a Deliverer.
type Options struct {
	Publisher     Publisher // branch and pull_request modes (default NotConfigured)
	MaxPatchBytes int64     // bound of the stored patch (default DefaultMaxPatchBytes)
	Now           func() time.Time
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Deliverer{o: o}
}

// Request is one decided attempt.
type Request struct {
	Template  *workitems.Template
	Item      *workitems.Item // before the decision is recorded
	Attempt   int
	Workspace string // the attempt's workspace, a git repository
	Base      string // the commit the attempt started from
	Decision  workitems.Decision
	Verdict   *workitems.Verdict
	Events    EventSink
	// NetworkRefused lists the connections the sandbox refused to the attempt's commands
	// ("host:port (reason)"); the pull request's body names them.
	NetworkRefused []string
}

// Result is the decision to record, with the delivery record and the patch to store with it.
type Result struct {
	Decision workitems.Decision
	Delivery *workitems.Delivery // nil: nothing to record (no close, no delivery)
	Patch    []byte              // at most MaxPatchBytes plus the truncation marker
}

// Deliver acts on a decided attempt (see the package doc). The error is only for transient
// trouble; the attempt's item then stays as it is and the caller tries again later.
func (d *Deliverer) Deliver(ctx context.Context, r Request) (Result, error) {
	if r.Template == nil || r.Item == nil {
		return Result{}, workitems.Classify(workitems.ClassInvariantViolation, errors.New("delivery: request without template or item"))
	}
	if r.Events == nil {
		r.Events = discard{}
	}
	res := Result{Decision: r.Decision}
	if r.Decision.Outcome != workitems.OutcomeClose {
		d.followup(ctx, r)
		return res, nil
	}
	mode := r.Template.Deliver.Mode
	if mode == "" {
		mode = workitems.DeliverPatch
	}
	del := &workitems.Delivery{Attempt: r.Attempt, Mode: mode, Base: r.Base, At: d.o.Now().UTC()}
	res.Delivery = del
	if r.Decision.Rule == workitems.RuleNoChange {
		del.Outcome = workitems.DeliveryUnchanged
		d.emit(ctx, r, workitems.StepUnchanged, "the check passed and the attempt changed nothing: nothing committed", nil)
		return res, nil
	}
	if r.Workspace == "" || r.Base == "" {
		return d.fail(ctx, r, res, workitems.ClassInvariantViolation, errors.New("delivery: no workspace with a base commit to commit in"))
	}
	author, err := workitems.ParseAuthor(r.Template.Deliver.Author)
	if err != nil {
		return d.fail(ctx, r, res, workitems.ClassInvalidInput, fmt.Errorf("delivery: deliver.author: %w", err))
	}
	g := git{dir: r.Workspace, env: []string{
		"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + author.Name, "GIT_COMMITTER_EMAIL=" + author.Email}}
	c, err := commitChange(ctx, g, r.Base, commitMessage(r), r.Item.ID, r.Attempt, reportExcludes(r.Template.DoneCheck.Reports))
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	if c.commit == "" {
		del.Outcome = workitems.DeliveryUnchanged
		res.Decision.Rule = workitems.RuleNoChange
		res.Decision.Reasons = append([]string{"unchanged: apart from the done check's reports the attempt changed nothing; nothing committed"},
			res.Decision.Reasons...)
		d.emit(ctx, r, workitems.StepUnchanged, "nothing but the done check's reports changed: nothing committed", nil)
		return res, nil
	}
	del.Commit, del.Tree, del.BaseTree = c.commit, c.tree, c.baseTree
	if c.reused {
		d.emit(ctx, r, workitems.StepReused, "the attempt's commit exists already (resumed): "+short(c.commit), map[string]string{"commit": c.commit})
	} else {
		d.emit(ctx, r, workitems.StepCommitted, "one commit on the base: "+short(c.commit), map[string]string{"commit": c.commit, "base": r.Base, "tree": c.tree})
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
		return res, nil
	}
	d.emit(ctx, r, workitems.StepPublish, "handing the commit to the forge ("+string(mode)+")", map[string]string{"mode": string(mode)})
	pub, err := d.o.Publisher.Publish(ctx, Publication{Template: r.Template, Item: r.Item, Attempt: r.Attempt, Workspace: r.Workspace,
		Delivery: *del, Decision: r.Decision, Events: r.Events, NetworkRefused: r.NetworkRefused})
	if err != nil {
		return d.failOrRetry(ctx, r, res, err)
	}
	if pub.Delivery.Outcome == "" {
		return d.fail(ctx, r, res, workitems.ClassInvariantViolation, errors.New("delivery: the publisher returned no outcome"))
	}
	*del = pub.Delivery
	del.Attempt, del.Mode = r.Attempt, mode
	if pub.Decision != nil {
		res.Decision = *pub.Decision
	}
	return res, nil
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

// fail turns the close into an escalation naming the cause, and records it on the delivery.
func (d *Deliverer) fail(ctx context.Context, r Request, res Result, class workitems.ErrorClass, err error) (Result, error) {
	del := res.Delivery
	del.Outcome, del.Error, del.ErrorClass = workitems.DeliveryFailed, err.Error(), class
	verdict := r.Decision
	res.Decision = workitems.Decision{
		Outcome:  workitems.OutcomeEscalate,
		Rule:     workitems.RuleDeliveryFailed,
		Reasons:  append([]string{fmt.Sprintf("delivery failed (%s): %v", class, err)}, prefixed("the check had passed: ", verdict.Reasons)...),
		Evidence: verdict.Evidence,
		Summary:  "delivery failed: " + err.Error(),
		Actor:    verdict.Actor,
		At:       verdict.At,
	}
	d.emit(ctx, r, workitems.StepFailed, "delivery failed: "+err.Error(), map[string]string{"class": string(class)})
	d.o.Logger.WarnContext(ctx, "delivery failed; the item is escalated", "item", r.Item.ID, "attempt", r.Attempt, "class", class, "err", err)
	return res, nil
}

// followup tells the publisher about a retry or an escalation of an item it delivered before.
func (d *Deliverer) followup(ctx context.Context, r Request) {
	prev := r.Item.Delivery
	if prev == nil || (prev.PR == nil && prev.Branch == "") {
		return
	}
	err := d.o.Publisher.Followup(ctx, Followup{Template: r.Template, Item: r.Item, Attempt: r.Attempt, Decision: r.Decision,
		Delivery: *prev, Events: r.Events})
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
	title := firstLine(r.Template.Deliver.Title)
	if title == "" {
		goal := r.Item.Goal
		if strings.TrimSpace(goal) == "" {
			goal = r.Template.Goal
		}
		title = firstLine(goal)
	}
	if title == "" {
		title = "outerloop: " + r.Template.Name
	}
	var b strings.Builder
	b.WriteString(clip(oneLine(title), 100))
	b.WriteString("\n\n")
	dec := r.Decision
	fmt.Fprintf(&b, "Verified by outerloop (%s)", dec.Rule)
	if len(dec.Reasons) > 0 {
		b.WriteString(": " + oneLine(dec.Reasons[0]))
	}
	b.WriteString(".\n")
	if r.Verdict != nil && r.Verdict.Summary != "" {
		b.WriteString("Evidence: " + oneLine(r.Verdict.Summary) + "\n")
	}
	fmt.Fprintf(&b, "\n%s: %s\n%s: %d\n", trailerItem, r.Item.ID, trailerAttempt, r.Attempt)
	return b.String()
}

func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

type discard struct{}

func (discard) Emit(context.Context, workitems.Event) {}
