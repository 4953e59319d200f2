package waits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/publish"
	"outerloop/verify"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Resolver applies a person's action to an item (scheduler.Queue.Resolve: it enqueues a retry's
// attempt and counts the decision).
type Resolver interface {
	Resolve(ctx context.Context, id string, r workitems.Resolution) (*workitems.Item, error)
}

// Auditor records what a person did through the forge in the deployment's audit list.
type Auditor interface {
	Audit(ctx context.Context, e AuditEntry)
}

// AuditEntry is one /outerloop command, acted on or refused.
type AuditEntry struct {
	Actor  string // "forge:user"
	Action string // outerloop retry|cancel|rebase
	Target string // the item
	OK     bool
	Detail string
}

// Triggers makes items from forge events a template subscribes to (triggers:).
type Triggers interface {
	Trigger(ctx context.Context, e hooks.Event) error
}

// Sink turns forge events into wakes of the waiting items they concern, /outerloop commands
// into a person's actions, and subscribed events into items. It is the hooks.Sink of serve's
// POST /hooks/{forge}. An error makes the forge deliver again later (the handler un-marks the
// delivery), so it is returned only for trouble worth another delivery.
//
// What the sink trusts: a pull request's body is anyone's to write, so the item its marker
// names is only a candidate. An event changes that item only when it is about the item's own
// delivery (workitems.Item.DeliveredTo: the same forge, repository and number) and its actor
// has write access to the item's repository; any other is refused — in the audit list, as a
// forge_refused event on the item, and in the log — and changes nothing.
type Sink struct {
	Store    *itemstore.Store
	Waker    Waker
	Resolver Resolver
	Forges   forge.Set
	Auditor  Auditor
	Triggers Triggers
	// Config is the config in force: an item's template's deliver: is where a delivery recorded
	// before deliveries named their forge and repository went (nil: such a record names no
	// pull request, and events on it are refused).
	Config func() *config.Config
	// Branches is the delivery's branch ledger: a `/outerloop rebase` from a person with write
	// access hands a branch people hold back to outerloop (nil: not wired).
	Branches publish.Branches
	// Cleaner deletes the branch of a pull request that was merged or closed, when it is
	// outerloop's alone (nil: branches are kept).
	Cleaner Cleaner
	// Actions counts a hand-back of a held branch (publish.Observer; nil: not counted).
	Actions publish.Observer
	Logger  *slog.Logger
}

// Cleaner cleans up after a delivery's pull request ended (delivery.Deliverer).
type Cleaner interface {
	Cleanup(ctx context.Context, c delivery.Cleanup) error
}

var _ hooks.Sink = (*Sink)(nil)

// forge looks up the named forge as the sink sees it: only the methods of CommandForge.
func (s *Sink) forge(name string) (CommandForge, error) { return s.Forges.Get(name) }

// commandRE is a comment's /outerloop command: the first line that starts with it.
var commandRE = regexp.MustCompile(`(?m)^\s*/outerloop\s+(retry|cancel|rebase)\b[ \t]*(.*)$`)

// Handle implements hooks.Sink.
func (s *Sink) Handle(ctx context.Context, e hooks.Event) error {
	if s.Triggers != nil {
		if err := s.Triggers.Trigger(ctx, e); err != nil {
			return err
		}
	}
	switch e.Kind {
	case hooks.KindCheck:
		if e.Check != nil && !e.Check.State.Final() {
			return nil // a check that started or is still running decides nothing
		}
		ids, err := s.Store.WaitingOnCommit(ctx, e.SHA)
		if err != nil {
			return err
		}
		return s.wake(ctx, ids, e)
	case hooks.KindReview, hooks.KindReviewComment, hooks.KindPullRequest:
		ids, err := s.Store.WaitingOnPR(ctx, e.Forge, e.Repo, e.Number)
		if err != nil {
			return err
		}
		if e.Kind == hooks.KindPullRequest && e.PullRequest != nil {
			if err := s.cleanup(ctx, e); err != nil {
				return err
			}
		}
		if len(ids) == 0 && e.Kind == hooks.KindPullRequest && e.PullRequest != nil {
			return s.ended(ctx, e)
		}
		return s.wake(ctx, ids, e)
	case hooks.KindComment:
		if e.IsPR && e.Comment != nil {
			return s.command(ctx, e)
		}
	}
	return nil
}

// wake enqueues the wake of each item still waiting on what the event is about.
func (s *Sink) wake(ctx context.Context, ids []string, e hooks.Event) error {
	for _, id := range ids {
		it, err := s.Store.Get(ctx, id)
		if errors.Is(err, workitems.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		w := it.Wait
		if it.State != workitems.StateWaiting || w == nil || w.Forge != e.Forge || !strings.EqualFold(w.Repo, e.Repo) {
			continue
		}
		if err := s.Waker.EnqueueWake(ctx, id, w.Seq, workitems.WakeWebhook); err != nil {
			return err
		}
		s.log().Info("waits: woken by a forge event", "item", id, "event", e.Kind, "delivery", e.DeliveryID)
	}
	return nil
}

// command reads "/outerloop retry|cancel|rebase" in the conversation of an item's own pull
// request, from a user with write access to the item's repository, as a person's signal; the
// person table (verify.DecidePerson) decides what it does. The pull request's marker only finds
// the candidate item.
func (s *Sink) command(ctx context.Context, e hooks.Event) error {
	m := commandRE.FindStringSubmatch(e.Comment.Body)
	if m == nil {
		return nil
	}
	sig, ok := verify.CommandSignal(m[1])
	if !ok {
		return nil
	}
	return s.signal(ctx, e, sig, e.Comment.User, "outerloop "+m[1], strings.TrimSpace(m[2]))
}

// ended reads a pull request a person merged or closed, with no item waiting on it, as that
// person's signal: the person table decides (an escalated item's pull request merged closes
// it, closed unmerged cancels it; an item in any other state is not that person's to end, and
// the event passes without a word).
func (s *Sink) ended(ctx context.Context, e hooks.Event) error {
	var sig verify.PersonSignal
	switch e.PullRequest.Action {
	case hooks.PRMerged:
		sig = verify.SignalMerged
	case hooks.PRClosed:
		sig = verify.SignalClosed
	default:
		return nil
	}
	return s.signal(ctx, e, sig, cmp.Or(e.PullRequest.MergedBy, e.Sender), "pull request "+string(e.PullRequest.Action), "")
}

// signal acts on a person's signal about the item e's pull request names: the event must be
// about the item's own pull request and user must have write access to its repository
// (authorise), then the person table decides and the resolver records it. A refusal is audited;
// only transient trouble is an error.
func (s *Sink) signal(ctx context.Context, e hooks.Event, sig verify.PersonSignal, user, action, text string) error {
	f, err := s.forge(e.Forge)
	if err != nil {
		return nil // a forge this deployment does not talk to: nothing to act on
	}
	it, pr, err := s.candidate(ctx, f, e)
	if err != nil || it == nil {
		return err
	}
	command := sig != verify.SignalMerged && sig != verify.SignalClosed
	r, err := verify.DecidePerson(verify.PersonFacts{Signal: sig, Item: it, Actor: e.Forge + ":" + user, User: user, PR: e.Number, Text: text})
	if !command && err != nil {
		return nil // not an item waiting for a person: its pull request's end is not theirs to decide
	}
	entry := AuditEntry{Actor: e.Forge + ":" + user, Action: action, Target: it.ID}
	if ok, aerr := s.authorise(ctx, f, it, e, user, &entry); !ok || aerr != nil {
		return aerr
	}
	if sig == verify.SignalRebase && s.Branches != nil && pr.Head != "" {
		// The person hands the branch back as it is now, whatever becomes of the item: the
		// next push may replace what people committed to it.
		held, herr := s.Branches.HandBack(ctx, publish.BranchKey{Forge: e.Forge, Repo: e.Repo, Branch: pr.Head}, pr.HeadSHA)
		if herr != nil {
			return herr
		}
		if held && s.Actions != nil {
			s.Actions.PullRequestAction(it.Template, workitems.StepHandedBack)
		}
		if eerr := s.Store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventDelivery, Actor: entry.Actor,
			Message: fmt.Sprintf("%s handed the branch %s back to outerloop at %s", user, pr.Head, pr.HeadSHA),
			Data:    map[string]string{"step": string(workitems.StepHandedBack), "branch": pr.Head, "sha": pr.HeadSHA}}); eerr != nil {
			s.log().Warn("waits: recording a hand-back on the item", "item", it.ID, "err", eerr)
		}
	}
	if err != nil {
		entry.Detail = "refused: " + err.Error()
		s.audit(ctx, entry)
		return nil
	}
	after, err := s.Resolver.Resolve(ctx, it.ID, r)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		entry.Detail = "refused: " + err.Error()
		s.audit(ctx, entry)
		return nil
	}
	entry.OK, entry.Detail = true, fmt.Sprintf("item %s is now %s by %s (pull request #%d)", it.ID, after.State, r.Rule, e.Number)
	s.audit(ctx, entry)
	s.log().Info("waits: a person's signal from the forge", "item", it.ID, "actor", entry.Actor, "signal", sig, "rule", r.Rule, "state", after.State)
	return nil
}

// candidate is the item the event's pull request names in its body's marker (nil: none, or no
// such item). The marker is a hint, copied as easily as read: authorise decides.
func (s *Sink) candidate(ctx context.Context, f CommandForge, e hooks.Event) (*workitems.Item, *forge.PullRequest, error) {
	pr, err := f.PullRequest(ctx, e.Repo, e.Number)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return nil, nil, err
		}
		s.log().Warn("waits: an event on a pull request that cannot be read", "repo", e.Repo, "pr", e.Number, "err", err)
		return nil, nil, nil
	}
	id, _ := publish.MarkedTree(pr.Body)
	if id == "" {
		return nil, nil, nil // not outerloop's pull request
	}
	it, err := s.Store.Get(ctx, id)
	if errors.Is(err, workitems.ErrNotFound) {
		s.log().Info("waits: a pull request's marker names no item", "item", id, "repo", e.Repo, "pr", e.Number)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return it, pr, nil
}

// cleanup asks for the branch of a merged or closed pull request to go. Only the ledger of what
// outerloop pushed decides whether the branch is deleted (Cleaner), never the event or the
// pull request's body: the marker only finds the item whose template says keep_branch.
func (s *Sink) cleanup(ctx context.Context, e hooks.Event) error {
	if s.Cleaner == nil || (e.PullRequest.Action != hooks.PRMerged && e.PullRequest.Action != hooks.PRClosed) {
		return nil
	}
	f, err := s.forge(e.Forge)
	if err != nil {
		return nil
	}
	it, pr, err := s.candidate(ctx, f, e)
	if err != nil || it == nil || pr.State == workitems.PROpen {
		return err
	}
	own := it.DeliveredPRs(s.deliver(it))
	if !slices.ContainsFunc(own, workitems.ForgePR{Forge: e.Forge, Repo: e.Repo, Number: e.Number}.Same) {
		return nil // not the item's own pull request: its branch is not the item's to delete
	}
	tmpl := &config.Template{Name: it.Template}
	if cfg := s.config(); cfg != nil {
		if t, ok := cfg.ItemTemplate(it); ok {
			tmpl = t
		}
	}
	del := workitems.Delivery{Mode: workitems.DeliverPullRequest, Forge: e.Forge, Repo: e.Repo, Branch: pr.Head,
		PR: &workitems.PullRequest{Number: pr.Number, URL: pr.URL, State: pr.State}}
	if err := s.Cleaner.Cleanup(ctx, delivery.Cleanup{Template: tmpl, Item: it, Attempt: it.Attempt, Delivery: del,
		Events: itemEvents{s: s, item: it.ID}}); err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		s.log().Warn("waits: cleaning up the branch of an ended pull request", "item", it.ID, "pr", pr.URL, "err", err)
	}
	return nil
}

// itemEvents records the cleanup's events on the item.
type itemEvents struct {
	s    *Sink
	item string
}

func (e itemEvents) Emit(ctx context.Context, ev workitems.Event) {
	ev.Item = e.item
	if err := e.s.Store.Emit(ctx, ev); err != nil {
		e.s.log().Warn("waits: recording an event on the item", "item", e.item, "err", err)
	}
}

// authorise reports whether the event may change it: the event is about the item's own pull
// request, and user has write access to the item's repository (as the item recorded it). A
// refusal is recorded (refuse); the error is transient trouble asking the forge.
func (s *Sink) authorise(ctx context.Context, f CommandForge, it *workitems.Item, e hooks.Event, user string, entry *AuditEntry) (bool, error) {
	pr := workitems.ForgePR{Forge: e.Forge, Repo: e.Repo, Number: e.Number}
	own := it.DeliveredPRs(s.deliver(it))
	i := slices.IndexFunc(own, pr.Same)
	if i < 0 {
		s.refuse(ctx, it.ID, workitems.RefusedNotDelivered, pr, entry, workitems.NotDeliveredReason(pr, it.ID, own))
		return false, nil
	}
	repo := own[i].Repo
	if user == "" {
		s.refuse(ctx, it.ID, workitems.RefusedPermission, pr, entry, "the forge did not say who acted")
		return false, nil
	}
	perm, err := permission(ctx, f, repo, user)
	if err != nil {
		return false, err
	}
	if !perm.CanWrite() {
		s.refuse(ctx, it.ID, workitems.RefusedPermission, pr, entry,
			fmt.Sprintf("%s has %s access to %s, the item's repository, and acting on the item needs write", user, perm, repo))
		return false, nil
	}
	return true, nil
}

// refuse records a refused event: a forge_refused event on the item, the audit entry, a log
// line. The item's event comes first, so that whoever sees the audit entry (the last record of
// the handling) finds the event on the item too.
func (s *Sink) refuse(ctx context.Context, id string, why workitems.ForgeRefusal, pr workitems.ForgePR, entry *AuditEntry, detail string) {
	entry.OK, entry.Detail = false, fmt.Sprintf("refused (%s): %s", why, detail)
	if err := s.Store.Emit(ctx, workitems.Event{Item: id, Type: workitems.EventForgeRefused, Actor: entry.Actor,
		Message: entry.Action + " " + entry.Detail,
		Data:    map[string]string{"refused": string(why), "action": entry.Action, "pr": pr.String()}}); err != nil {
		s.log().Warn("waits: recording a refused forge event on the item", "item", id, "err", err)
	}
	s.audit(ctx, *entry)
	s.log().Warn("waits: a forge event refused", "item", id, "actor", entry.Actor, "action", entry.Action, "refused", why,
		"pr", pr.String(), "detail", detail)
}

func (s *Sink) config() *config.Config {
	if s.Config == nil {
		return nil
	}
	return s.Config()
}

// deliver is the item's template's deliver: (nil: no config, or the template is gone).
func (s *Sink) deliver(it *workitems.Item) *config.Deliver {
	cfg := s.config()
	if cfg == nil {
		return nil
	}
	t, ok := cfg.ItemTemplate(it)
	if !ok {
		return nil
	}
	return &t.Deliver
}

func (s *Sink) audit(ctx context.Context, e AuditEntry) {
	if s.Auditor != nil {
		s.Auditor.Audit(ctx, e)
	}
}

func (s *Sink) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
