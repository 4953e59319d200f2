package workitems

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Origin says who created an item.
type Origin struct {
	Kind  OriginKind `json:"kind"`            // one of the Origin… constants
	Actor string     `json:"actor,omitempty"` // person or system that asked
	Tick  time.Time  `json:"tick,omitzero"`   // cron tick the item belongs to
	// Forced is set when a person created the item past the template's max_open (--force).
	Forced bool `json:"forced,omitempty"`
	// Caller is how the caller of a template's trigger endpoint proved itself (origin api).
	Caller *CallerOrigin `json:"caller,omitempty"`
	// Alert is the alert group that made an item of kind alert (alert_origin.go).
	Alert *AlertOrigin `json:"alert,omitempty"`
}

// CallerOrigin records the request to POST /api/templates/{name}/trigger that made an item:
// enough to say what started it, nothing personal (not the caller's address) and never the
// secret or the signature.
type CallerOrigin struct {
	Auth CallerAuth `json:"auth"`
	// IdempotencyKey is the caller's key, when it sent one (the item's id derives from it).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Fields are the names of the body's fields (their values are in the first attempt's input).
	Fields []string `json:"fields,omitempty"`
}

// CallerAuth is how a trigger's caller proved the template's secret.
type CallerAuth string

// The caller authentications.
const (
	CallerBearer CallerAuth = "bearer" // Authorization: Bearer <secret>
	CallerHMAC   CallerAuth = "hmac"   // X-Outerloop-Signature over the timestamp and the body
)

// AllCallerAuths lists every CallerAuth.
func AllCallerAuths() []CallerAuth { return []CallerAuth{CallerBearer, CallerHMAC} }

// OriginKind is what made an item.
type OriginKind string

// The origin kinds.
const (
	OriginCron    OriginKind = "cron"
	OriginManual  OriginKind = "manual"
	OriginWebhook OriginKind = "webhook" // a forge event (a trigger)
	OriginEval    OriginKind = "eval"    // a run of an experiment (package evals); Actor is the experiment
	OriginRerun   OriginKind = "rerun"   // a person re-ran another item (Item.RerunOf)
	OriginAPI     OriginKind = "api"     // a caller of a template's trigger endpoint (Origin.Caller)
	OriginAlert   OriginKind = "alert"   // an Alertmanager notification (Origin.Alert)
)

// AllOriginKinds lists every OriginKind.
func AllOriginKinds() []OriginKind {
	return []OriginKind{OriginCron, OriginManual, OriginWebhook, OriginEval, OriginRerun, OriginAPI, OriginAlert}
}

// Strategy is how an attempt goes about the goal.
type Strategy struct {
	Loop          LoopKind `json:"loop,omitempty"`           // inner loop kind override
	Model         string   `json:"model,omitempty"`          // model override
	PromptVariant string   `json:"prompt_variant,omitempty"` // e.g. "stabilise", "minimal-diff"
	Scope         string   `json:"scope,omitempty"`          // narrowed scope (paths, packages)
}

// Condition is what an attempt runs under. A retry must differ from the previous attempt's
// condition in at least one field; Changes names which.
type Condition struct {
	Input         string            `json:"input,omitempty"` // extra context: failure summary, human answer
	Env           map[string]string `json:"env,omitempty"`
	CleanCheckout bool              `json:"clean_checkout,omitempty"`
	Strategy      Strategy          `json:"strategy,omitzero"`
	NotBefore     time.Time         `json:"not_before,omitzero"`
	Budget        Budget            `json:"budget,omitzero"`     // per-attempt overrides (a person raised a cap)
	Restarted     bool              `json:"restarted,omitempty"` // an external agent could not resume its session
}

// Changes lists the fields of c that differ from prev, by their JSON names.
func (c Condition) Changes(prev Condition) []string {
	var out []string
	if c.Input != prev.Input {
		out = append(out, "input")
	}
	if !maps.Equal(c.Env, prev.Env) {
		out = append(out, "env")
	}
	if c.CleanCheckout != prev.CleanCheckout {
		out = append(out, "clean_checkout")
	}
	if c.Strategy.Loop != prev.Strategy.Loop {
		out = append(out, "strategy.loop")
	}
	if c.Strategy.Model != prev.Strategy.Model {
		out = append(out, "strategy.model")
	}
	if c.Strategy.PromptVariant != prev.Strategy.PromptVariant {
		out = append(out, "strategy.prompt_variant")
	}
	if c.Strategy.Scope != prev.Strategy.Scope {
		out = append(out, "strategy.scope")
	}
	if !c.NotBefore.Equal(prev.NotBefore) {
		out = append(out, "not_before")
	}
	if c.Budget != prev.Budget {
		out = append(out, "budget")
	}
	if c.Restarted != prev.Restarted {
		out = append(out, "restarted")
	}
	return out
}

// ExitReason is how an inner loop ended. "completed" is a claim, not a verdict.
type ExitReason string

// The exit reasons.
const (
	ExitCompleted       ExitReason = "completed"
	ExitNeedsInput      ExitReason = "needs_input"
	ExitNeedsApproval   ExitReason = "needs_approval"
	ExitBudgetExhausted ExitReason = "budget_exhausted"
	ExitNoProgress      ExitReason = "no_progress"
	ExitTransientError  ExitReason = "transient_error"
	ExitFailed          ExitReason = "failed"
	ExitAborted         ExitReason = "aborted"
)

// AllExitReasons lists every exit reason.
func AllExitReasons() []ExitReason {
	return []ExitReason{ExitCompleted, ExitNeedsInput, ExitNeedsApproval, ExitBudgetExhausted,
		ExitNoProgress, ExitTransientError, ExitFailed, ExitAborted}
}

// Exit is an inner loop's explicit end.
type Exit struct {
	Reason  ExitReason `json:"reason"`
	Budget  BudgetKind `json:"budget,omitempty"` // with budget_exhausted: which cap
	Class   ErrorClass `json:"class,omitempty"`  // with failed / transient_error
	Message string     `json:"message,omitempty"`
	// LastMessage is the loop's final claim (agent text, script tail).
	LastMessage string `json:"last_message,omitempty"`
}

// ErrorClass is the recovery class of an error.
type ErrorClass string

// The error classes; each has its own recovery.
const (
	ClassTransient          ErrorClass = "transient"
	ClassInvalidInput       ErrorClass = "invalid_input"
	ClassPermission         ErrorClass = "permission"
	ClassNotFound           ErrorClass = "not_found"
	ClassConflict           ErrorClass = "conflict"
	ClassInvariantViolation ErrorClass = "invariant_violation"
	ClassUnknown            ErrorClass = "unknown"
)

// AllErrorClasses lists every error class.
func AllErrorClasses() []ErrorClass {
	return []ErrorClass{ClassTransient, ClassInvalidInput, ClassPermission, ClassNotFound,
		ClassConflict, ClassInvariantViolation, ClassUnknown}
}

// ClassError carries an error class; errors.As finds it in a chain.
type ClassError struct {
	Class ErrorClass
	Err   error
}

func (e *ClassError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }
func (e *ClassError) Unwrap() error { return e.Err }

// Classify wraps err with a class.
func Classify(class ErrorClass, err error) error {
	if err == nil {
		return nil
	}
	return &ClassError{Class: class, Err: err}
}

// ClassOf returns the class of err (unknown when none was given).
func ClassOf(err error) ErrorClass {
	var ce *ClassError
	if errors.As(err, &ce) {
		return ce.Class
	}
	return ClassUnknown
}

// Outcome is a verifier's (or a person's) decision.
type Outcome string

// The outcomes.
const (
	OutcomeClose    Outcome = "close"
	OutcomeRetry    Outcome = "retry"
	OutcomeEscalate Outcome = "escalate"
	OutcomeCancel   Outcome = "cancel" // only by a person
	// OutcomeWait parks the item until evidence that is not there yet arrives (CI on the pushed
	// commit, a review): Decision.Wait says what and until when.
	OutcomeWait Outcome = "wait"
)

// ActorKind says who decided: the verifier after an attempt, or a person resolving an item
// (CLI, API or console).
type ActorKind string

// The actor kinds.
const (
	ActorVerifier ActorKind = "verifier"
	ActorPerson   ActorKind = "person"
)

// AllActorKinds lists every actor kind.
func AllActorKinds() []ActorKind { return []ActorKind{ActorVerifier, ActorPerson} }

// Outcomes returns the outcomes an actor of kind k can decide: the verifier closes, retries or
// escalates, or waits for evidence still to come; a person closes, retries or cancels.
func (k ActorKind) Outcomes() []Outcome {
	switch k {
	case ActorVerifier:
		return []Outcome{OutcomeClose, OutcomeRetry, OutcomeEscalate, OutcomeWait}
	case ActorPerson:
		return []Outcome{OutcomeClose, OutcomeRetry, OutcomeCancel}
	}
	return nil
}

// EvidenceKind is what a piece of a decision's evidence is.
type EvidenceKind string

// The evidence kinds.
const (
	EvidenceExit       EvidenceKind = "exit"        // the attempt's exit reason
	EvidenceCommand    EvidenceKind = "command"     // a done-check command and its outcome
	EvidenceTestReport EvidenceKind = "test_report" // a parsed report, or "missing"
	EvidenceDiff       EvidenceKind = "diff"        // the attempt's change against its base
	EvidenceCICheck    EvidenceKind = "ci_check"    // a CI check on the pushed commit, or "missing"
)

// EvidenceRef points at one piece of evidence a decision used.
type EvidenceRef struct {
	Kind    EvidenceKind `json:"kind"`              // one of the Evidence… constants
	Ref     string       `json:"ref"`               // file, check name, command
	Summary string       `json:"summary,omitempty"` // one line
}

// Decision is what happened after an attempt, with its reasons.
type Decision struct {
	Outcome   Outcome       `json:"outcome"`
	Rule      RuleName      `json:"rule"` // the policy rule that fired (AllRuleNames)
	Reasons   []string      `json:"reasons,omitempty"`
	Evidence  []EvidenceRef `json:"evidence,omitempty"`
	Signature string        `json:"signature,omitempty"` // failure signature, for repeat detection
	Next      *Condition    `json:"next,omitempty"`      // with retry: the condition of the next attempt
	Wait      *WaitPlan     `json:"wait,omitempty"`      // with wait: what for and until when
	Summary   string        `json:"summary,omitempty"`   // short evidence summary for people
	// Cause says, when a failure is the sandbox's doing, what it refused and the setting that
	// would allow it; Output is the failing command's last lines (redacted).
	Cause  string    `json:"cause,omitempty"`
	Output string    `json:"output,omitempty"`
	Actor  string    `json:"actor"` // ActorVerifierName or ActorWorkerName (Kind says which kind)
	At     time.Time `json:"at"`
}

// AttemptState is where one attempt of an item is. An attempt moves forward only:
//
//	queued → running → verifying → done
//
// (a resumed attempt stays running; the item's State says what became of it).
type AttemptState string

// The attempt states.
const (
	AttemptQueued    AttemptState = "queued"
	AttemptRunning   AttemptState = "running"
	AttemptVerifying AttemptState = "verifying"
	AttemptDone      AttemptState = "done"
)

// AllAttemptStates lists every attempt state, in order.
func AllAttemptStates() []AttemptState {
	return []AttemptState{AttemptQueued, AttemptRunning, AttemptVerifying, AttemptDone}
}

// ResolutionAction is what a person decides for an escalated item.
type ResolutionAction string

// The resolution actions. Cancel also applies to any item that is not terminal.
const (
	ResolveClose  ResolutionAction = "close"
	ResolveRetry  ResolutionAction = "retry"
	ResolveCancel ResolutionAction = "cancel"
)

// AllResolutionActions lists every resolution action.
func AllResolutionActions() []ResolutionAction {
	return []ResolutionAction{ResolveClose, ResolveRetry, ResolveCancel}
}

// EscalationAction is what an escalation suggests a person do: a resolution action, or
// raise_budget (a retry with a larger budget).
type EscalationAction string

// The escalation actions.
const (
	SuggestClose       EscalationAction = EscalationAction(ResolveClose)
	SuggestRetry       EscalationAction = EscalationAction(ResolveRetry)
	SuggestCancel      EscalationAction = EscalationAction(ResolveCancel)
	SuggestRaiseBudget EscalationAction = "raise_budget"
)

// AllEscalationActions lists the escalation actions.
func AllEscalationActions() []EscalationAction {
	return []EscalationAction{SuggestClose, SuggestRetry, SuggestRaiseBudget, SuggestCancel}
}

// Attempt is one run of an inner loop for an item.
type Attempt struct {
	N         int          `json:"n"`
	Condition Condition    `json:"condition"`
	Changed   []string     `json:"changed,omitempty"` // what differs from attempt N-1
	State     AttemptState `json:"state"`
	StartedAt time.Time    `json:"started_at,omitzero"`
	EndedAt   time.Time    `json:"ended_at,omitzero"`
	Worker    string       `json:"worker,omitempty"`
	Epoch     int64        `json:"epoch,omitempty"`
	Resumes   int          `json:"resumes,omitempty"`
	Exit      *Exit        `json:"exit,omitempty"`
	Spend     Spend        `json:"spend,omitzero"`
	Decision  *Decision    `json:"decision,omitempty"`
	Workspace string       `json:"workspace,omitempty"`
	Verified  *Verdict     `json:"verified,omitempty"`
	Delivery  *Delivery    `json:"delivery,omitempty"` // what became of the attempt's change
	// Base is where the attempt's workspace started; ExitSnapshot its tree when the loop exited.
	Base         *WorkspaceBase     `json:"base,omitempty"`
	ExitSnapshot *WorkspaceSnapshot `json:"exit_snapshot,omitempty"`
}

// Verdict is the evidence summary the verifier recorded for an attempt.
type Verdict struct {
	Summary     string   `json:"summary"`
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests,omitempty"`
	FirstError  string   `json:"first_error,omitempty"`
	OutputTail  string   `json:"output_tail,omitempty"`
}

// Escalation is why an item waits for a person.
type Escalation struct {
	Reason  string             `json:"reason"`
	Summary string             `json:"summary,omitempty"`
	Cause   string             `json:"cause,omitempty"`  // the sandbox's doing and the setting to change (Decision.Cause)
	Output  string             `json:"output,omitempty"` // the failing command's last lines, redacted
	At      time.Time          `json:"at"`
	Actions []EscalationAction `json:"actions,omitempty"` // what a person is suggested to do
}

// Item is one unit of work: a goal from a template, worked on by attempts until closed.
type Item struct {
	ID          string       `json:"id"`
	Template    string       `json:"template"`
	Goal        string       `json:"goal"`
	Origin      Origin       `json:"origin"`
	State       State        `json:"state"`
	Attempt     int          `json:"attempt"` // current attempt number, from 1
	Attempts    []Attempt    `json:"attempts"`
	Spend       Spend        `json:"spend"`       // across all attempts; never reset
	ItemBudget  Budget       `json:"item_budget"` // caps across attempts
	Budget      Budget       `json:"budget"`      // per-attempt caps (template + defaults)
	MaxAttempts int          `json:"max_attempts"`
	Escalation  *Escalation  `json:"escalation,omitempty"`
	Decisions   []Decision   `json:"decisions,omitempty"`
	CancelReq   bool         `json:"cancel_requested,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
	Version     int64        `json:"version"`
	Resolution  []Resolution `json:"resolutions,omitempty"`
	// Wait is what a waiting item waits for (nil in every other state).
	Wait *Wait `json:"wait,omitempty"`
	// Delivery is the latest attempt's delivery record (its branch and pull request are where
	// later attempts deliver to).
	Delivery *Delivery `json:"delivery,omitempty"`
	// RerunOf is the item this one re-runs (same template and input); Reruns are the items
	// that re-ran this one, oldest first (see Store.CreateRerun).
	RerunOf string   `json:"rerun_of,omitempty"`
	Reruns  []string `json:"reruns,omitempty"`
	// Pin is the config and template version the item was created under (config_version.go).
	Pin *ConfigPin `json:"config,omitempty"`
	// Ref is the branch, tag or commit of the template's repository that new attempts start
	// from (empty: the tip of its default branch). Evals set it to run a task where it was.
	Ref string `json:"ref,omitempty"`
	// Repo is the repository of a fleet template's item (empty: the template's repo); see
	// config.Config.ItemTemplate.
	Repo string `json:"repo,omitempty"`
	// NextInput is text for the item's next attempt (an alert resolved while it was open):
	// added to that attempt's input when it is made, then cleared (itemstore.AddNextInput).
	NextInput []string `json:"next_input,omitempty"`
}

// Resolution records a person's action on an item.
type Resolution struct {
	Action ResolutionAction `json:"action"`
	Actor  string           `json:"actor"`
	// Rule is the row of verify's person table that read the person's action from the forge
	// (a comment command, a merged pull request); empty when the person resolved directly.
	Rule       RuleName  `json:"rule,omitempty"`
	Input      string    `json:"input,omitempty"`
	Budget     Budget    `json:"budget,omitzero"`      // per-attempt caps for the next attempt
	ItemBudget Budget    `json:"item_budget,omitzero"` // raised item caps
	At         time.Time `json:"at"`
}

// Current returns the current attempt, or nil before the first.
func (it *Item) Current() *Attempt {
	for i := range it.Attempts {
		if it.Attempts[i].N == it.Attempt {
			return &it.Attempts[i]
		}
	}
	return nil
}

// SetState moves the item along one edge of the state machine.
func (it *Item) SetState(to State) error {
	s, err := Transition(it.State, to)
	if err != nil {
		return fmt.Errorf("item %s: %w", it.ID, err)
	}
	it.State = s
	if s != StateWaiting {
		it.Wait = nil // a wait lives only as long as the waiting state
	}
	return nil
}

// AttemptBudget is the budget for attempt n: the item's per-attempt caps with the condition's
// overrides, clipped by what is left of the item budget.
func (it *Item) AttemptBudget(c Condition) Budget {
	b := it.Budget.Merge(c.Budget)
	left := it.ItemBudget
	if left.IsZero() {
		return b
	}
	for _, k := range AllBudgetKinds() {
		capItem := left.Cap(k)
		if capItem <= 0 {
			continue
		}
		rest := capItem - it.Spend.Of(k)
		if rest < 0 {
			rest = 0
		}
		if b.Cap(k) == 0 || rest < b.Cap(k) {
			// A cap of exactly zero would read as "no cap": keep a tiny positive one.
			if rest == 0 {
				rest = 1e-9
			}
			_ = b.Set(k, rest)
		}
	}
	return b
}

// UrgentQueue is the asynq queue next to queue whose tasks workers take first (strict priority):
// recoveries of attempts whose worker died and wakes of waiting items, so that neither waits
// behind the backlog of new work.
func UrgentQueue(queue string) string { return queue + "-urgent" }

// TaskID is the asynq task id of attempt n of an item.
func TaskID(itemID string, n int) string { return fmt.Sprintf("%s/attempt-%d", itemID, n) }

// ParseTaskID splits a task id made by TaskID.
func ParseTaskID(id string) (itemID string, n int, err error) {
	i := strings.LastIndex(id, "/attempt-")
	if i < 0 {
		return "", 0, fmt.Errorf("workitems: task id %q: missing /attempt-N", id)
	}
	if _, err := fmt.Sscanf(id[i+len("/attempt-"):], "%d", &n); err != nil || n < 1 {
		return "", 0, fmt.Errorf("workitems: task id %q: bad attempt number", id)
	}
	return id[:i], n, nil
}

// CronItemID is the deterministic id of the item for one cron tick of a template.
func CronItemID(template string, tick time.Time) string {
	return template + "@" + tick.UTC().Format("20060102T150405Z")
}

// Stats is the store's aggregate view, for metrics and the console.
type Stats struct {
	Items              map[string]map[State]int `json:"items"` // template → state → count
	OpenEscalations    int                      `json:"open_escalations"`
	OldestEscalationAt time.Time                `json:"oldest_escalation_at,omitzero"`
	DailyCostUSD       map[string]float64       `json:"daily_cost_usd"` // template → today's (UTC) cost
	LastClosedAt       map[string]time.Time     `json:"last_closed_at"` // template → last close
	// Waiting counts the waiting items by wait kind (WaitingByKind); FirstPollAt is the earliest
	// next poll among them (zero: none waits), so the poll lag at t is t − FirstPollAt (PollLag).
	Waiting     map[WaitKind]int64 `json:"waiting"`
	FirstPollAt time.Time          `json:"first_poll_at,omitzero"`
}

// SortedTemplates returns the template names in s, sorted.
func (s Stats) SortedTemplates() []string {
	set := map[string]bool{}
	for k := range s.Items {
		set[k] = true
	}
	for k := range s.DailyCostUSD {
		set[k] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// TaskTypeAttempt is the asynq task type that runs one attempt of an item: the contract
// between the scheduler, which enqueues it, and the worker, which handles it.
const TaskTypeAttempt = "outerloop:attempt"

// TaskPayload is an attempt task's body. The task id (TaskID) says the same; the payload is
// kept so that asynq tooling shows it.
type TaskPayload struct {
	Item    string `json:"item"`
	Attempt int    `json:"attempt"`
	// Recover marks a task enqueued for an attempt whose worker is gone (RecoverTaskID): when
	// the attempt's lease turns out to be held after all, its holder lives and the task is
	// dropped instead of retried.
	Recover bool `json:"recover,omitempty"`
}

// RecoverTaskID is the asynq task id of the recovery of attempt n of an item after its worker
// was lost at fencing epoch epoch: one per epoch, so that several workers repairing the same
// loss enqueue one task, and a later loss gets a task of its own.
func RecoverTaskID(itemID string, n int, epoch int64) string {
	return fmt.Sprintf("%s/recover-%d", TaskID(itemID, n), epoch)
}
