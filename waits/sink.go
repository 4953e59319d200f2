package waits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/publish"
	"outerloop/workitems"
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
type Sink struct {
	Store    *workitems.Store
	Waker    Waker
	Resolver Resolver
	Forges   forge.Set
	Auditor  Auditor
	Triggers Triggers
	Logger   *slog.Logger
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

// command acts on "/outerloop retry|cancel|rebase" in a pull request's conversation, from a user
// with write access to the repository; the pull request's body names the item (its marker).
func (s *Sink) command(ctx context.Context, e hooks.Event) error {
	m := commandRE.FindStringSubmatch(e.Comment.Body)
	if m == nil {
		return nil
	}
	verb, rest := m[1], strings.TrimSpace(m[2])
	actor := e.Forge + ":" + e.Comment.User
	entry := AuditEntry{Actor: actor, Action: "outerloop " + verb}
	f, err := s.forge(e.Forge)
	if err != nil {
		return nil // a forge this deployment does not talk to: nothing to act on
	}
	pr, err := f.PullRequest(ctx, e.Repo, e.Number)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		s.log().Warn("waits: a command on a pull request that cannot be read", "repo", e.Repo, "pr", e.Number, "err", err)
		return nil
	}
	id, _ := publish.MarkedTree(pr.Body)
	if id == "" {
		return nil // not outerloop's pull request
	}
	entry.Target = id
	perm, err := f.Permission(ctx, e.Repo, e.Comment.User)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		perm = forge.PermNone
	}
	if !perm.CanWrite() {
		entry.Detail = fmt.Sprintf("refused: %s has %s access to %s, a command needs write", e.Comment.User, perm, e.Repo)
		s.audit(ctx, entry)
		return nil
	}
	r := workitems.Resolution{Actor: actor}
	switch verb {
	case "cancel":
		r.Action = workitems.ResolveCancel
	case "retry", "rebase":
		r.Action = workitems.ResolveRetry
		r.Input = fmt.Sprintf("%s asked for a %s on pull request #%d.", e.Comment.User, verb, e.Number)
		if verb == "rebase" {
			r.Input += " The attempt starts from the base branch as it is now; make the change again on it."
		}
		if rest != "" {
			r.Input += "\n\n" + rest
		}
	}
	it, err := s.Resolver.Resolve(ctx, id, r)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		entry.Detail = "refused: " + err.Error()
		s.audit(ctx, entry)
		return nil
	}
	entry.OK, entry.Detail = true, fmt.Sprintf("item %s is now %s (pull request #%d)", id, it.State, e.Number)
	s.audit(ctx, entry)
	s.log().Info("waits: a person's command from the forge", "item", id, "actor", actor, "command", verb, "state", it.State)
	return nil
}

// ended acts on a pull request a person merged or closed whose item waits for that person
// (escalated): merged closes the item, closed unmerged cancels it; both by that person.
func (s *Sink) ended(ctx context.Context, e hooks.Event) error {
	act := workitems.ResolveClose
	switch e.PullRequest.Action {
	case hooks.PRMerged:
	case hooks.PRClosed:
		act = workitems.ResolveCancel
	default:
		return nil
	}
	f, err := s.forge(e.Forge)
	if err != nil {
		return nil
	}
	pr, err := f.PullRequest(ctx, e.Repo, e.Number)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		return nil
	}
	id, _ := publish.MarkedTree(pr.Body)
	if id == "" {
		return nil
	}
	it, err := s.Store.Get(ctx, id)
	if err != nil || it.State != workitems.StateEscalated {
		return nil // only an item waiting for a person is that person's to end
	}
	actor := e.Forge + ":" + cmp.Or(e.PullRequest.MergedBy, e.Sender)
	entry := AuditEntry{Actor: actor, Action: "pull request " + string(e.PullRequest.Action), Target: id}
	if _, err := s.Resolver.Resolve(ctx, id, workitems.Resolution{Action: act, Actor: actor,
		Input: fmt.Sprintf("pull request #%d was %s on the forge", e.Number, e.PullRequest.Action)}); err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return err
		}
		entry.Detail = "refused: " + err.Error()
	} else {
		entry.OK, entry.Detail = true, fmt.Sprintf("item %s %s: its pull request #%d was %s", id, act, e.Number, e.PullRequest.Action)
	}
	s.audit(ctx, entry)
	return nil
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
