package workitems

import (
	"fmt"
	"strings"
)

// The vocabularies the config file's fields take (providers.<name>.kind, loop.kind,
// deliver.mode, notify.events, sandbox.network, ...). The config itself (its types, parsing,
// defaults and validation) is package workitems/config, which names its fields with these.

// ProviderKind is the wire protocol of a model provider: what `providers.<name>.kind` may say
// and what worker/model implements (model.New has a case for each).
type ProviderKind string

// The provider kinds.
const (
	ProviderOpenAIResponses ProviderKind = "openai-responses"
	ProviderOpenAIChat      ProviderKind = "openai-chat"
	ProviderAnthropic       ProviderKind = "anthropic"
	ProviderReplay          ProviderKind = "replay" // a recording, played in order
)

// ProviderKinds lists the provider kinds.
func ProviderKinds() []ProviderKind {
	return []ProviderKind{ProviderOpenAIResponses, ProviderOpenAIChat, ProviderAnthropic, ProviderReplay}
}

// ExecAgents lists the external agents `loop.kind: exec` can run.
func ExecAgents() []string { return []string{"codex", "claude", "aider", "command"} }

// CIProvider is where a done check's CI results come from when no forge key names it.
type CIProvider string

// The CI providers.
const (
	// CIProviderGitHub resolves to the forge of kind github (configs written before forges:).
	CIProviderGitHub CIProvider = "github"
	// CIProviderWebhook reads results posted to POST /api/evidence.
	CIProviderWebhook CIProvider = "webhook"
)

// AllCIProviders lists the CI providers.
func AllCIProviders() []CIProvider { return []CIProvider{CIProviderGitHub, CIProviderWebhook} }

// LoopKind names an inner loop: a template's loop.kind, or an attempt's strategy override. The
// built-in kinds are below; a process registers more with its loop registry (worker.Registry),
// which says what each kind does (LoopTraits), so no code outside a loop's own package compares
// kinds.
type LoopKind string

// The built-in loop kinds (config.BuiltinLoopKinds).
const (
	LoopScript LoopKind = "script" // the template's commands, in order (worker/scriptloop)
	LoopAgent  LoopKind = "agent"  // outerloop's own agent, calling a model provider (worker/agentloop)
	LoopExec   LoopKind = "exec"   // an external coding agent's CLI: codex, claude, aider, a command (worker/execloop)
)

// LoopKinds lists the built-in inner loop kinds, sorted (config.BuiltinLoopKinds' kinds); a
// deployment's registry may add more (config.ParseConfigWith).
func LoopKinds() []LoopKind { return []LoopKind{LoopAgent, LoopExec, LoopScript} }

// ForgeKind is the API a code forge speaks.
type ForgeKind string

// The forge kinds.
const (
	// ForgeGitHub is github.com or GitHub Enterprise Server (REST v3).
	ForgeGitHub ForgeKind = "github"
	// ForgeGitea is Gitea, Forgejo or Codeberg (Gitea's API v1).
	ForgeGitea ForgeKind = "gitea"
)

// AllForgeKinds lists every forge kind.
func AllForgeKinds() []ForgeKind { return []ForgeKind{ForgeGitHub, ForgeGitea} }

// DeliveryMode is what a closed item's change becomes.
type DeliveryMode string

// The delivery modes.
const (
	// DeliverPatch keeps the patch with the item (nothing is pushed).
	DeliverPatch DeliveryMode = "patch"
	// DeliverBranch pushes the change to the template's branch and stops.
	DeliverBranch DeliveryMode = "branch"
	// DeliverPullRequest pushes and opens (or updates) a pull request.
	DeliverPullRequest DeliveryMode = "pull_request"
)

// AllDeliveryModes lists every delivery mode.
func AllDeliveryModes() []DeliveryMode {
	return []DeliveryMode{DeliverPatch, DeliverBranch, DeliverPullRequest}
}

// MergeMethod is how a pull request is merged.
type MergeMethod string

// The merge methods.
const (
	MergeMerge  MergeMethod = "merge"
	MergeSquash MergeMethod = "squash"
	MergeRebase MergeMethod = "rebase"
)

// AllMergeMethods lists every merge method.
func AllMergeMethods() []MergeMethod { return []MergeMethod{MergeMerge, MergeSquash, MergeRebase} }

// OnChangesRequested is what a review that requests changes leads to.
type OnChangesRequested string

// The reactions to a review that requests changes.
const (
	// ChangesRetry starts the item's next attempt with the review's body and inline comments
	// as its input; it pushes a new commit to the same pull request.
	ChangesRetry OnChangesRequested = "retry"
	// ChangesEscalate hands the item to a person.
	ChangesEscalate OnChangesRequested = "escalate"
)

// AllOnChangesRequested lists every reaction to a review that requests changes.
func AllOnChangesRequested() []OnChangesRequested {
	return []OnChangesRequested{ChangesRetry, ChangesEscalate}
}

// NeedsForge reports whether the mode delivers through a forge.
func (m DeliveryMode) NeedsForge() bool { return m == DeliverBranch || m == DeliverPullRequest }

// RebasePolicy is deliver.rebase: when an open pull request whose base moved gets a new commit.
type RebasePolicy string

// The rebase policies.
const (
	// RebaseConflicted pushes to an open pull request only when it conflicts with its base
	// (or the change itself differs): a base that merely moved costs no CI run.
	RebaseConflicted RebasePolicy = "conflicted"
	// RebaseBehind pushes whenever the base moved.
	RebaseBehind RebasePolicy = "behind"
	// RebaseNever leaves an open pull request's commit alone unless the change differs.
	RebaseNever RebasePolicy = "never"
)

// AllRebasePolicies lists the rebase policies.
func AllRebasePolicies() []RebasePolicy {
	return []RebasePolicy{RebaseConflicted, RebaseBehind, RebaseNever}
}

// ForeignCommitPolicy is deliver.on_foreign_commits: what outerloop does to a branch someone
// else committed to.
type ForeignCommitPolicy string

// The foreign commit policies.
const (
	// ForeignStop pushes nothing more to the branch: the item escalates (a scheduled tick closes
	// as held_by_person) and the pull request is told once who held it and how to hand it back.
	ForeignStop ForeignCommitPolicy = "stop"
	// ForeignBuildOn makes outerloop's change a new commit on top of the person's, never
	// rewriting the branch's history.
	ForeignBuildOn ForeignCommitPolicy = "build_on"
)

// AllForeignCommitPolicies lists the foreign commit policies.
func AllForeignCommitPolicies() []ForeignCommitPolicy {
	return []ForeignCommitPolicy{ForeignStop, ForeignBuildOn}
}

// DraftUntil is deliver.draft_until: what makes a draft pull request ready for review.
type DraftUntil string

// The draft conditions.
const (
	// DraftUntilCIGreen opens the pull request as a draft and marks it ready when the required
	// CI checks on the pushed commit pass, so reviewers are asked only for green work.
	DraftUntilCIGreen DraftUntil = "ci_green"
)

// AllDraftUntil lists the draft conditions.
func AllDraftUntil() []DraftUntil { return []DraftUntil{DraftUntilCIGreen} }

// NotifyEvent is a kind of event that people are told about (the `notify:` section).
type NotifyEvent string

// The events notifications are sent for.
const (
	// NotifyEscalation: an item was escalated and waits for a person.
	NotifyEscalation NotifyEvent = "escalation"
	// NotifyFailure: an item failed for good (an invariant broke, e.g. its template is gone).
	NotifyFailure NotifyEvent = "failure"
	// NotifyDailyCap: a template reached its daily cost cap, so its ticks are skipped until
	// the next UTC day (told once per template and day).
	NotifyDailyCap NotifyEvent = "daily_cap"
	// NotifyFleetPaused: a fleet template's breaker paused it after consecutive failures
	// (fleet.pause_after_failures); it stays paused until a person resumes it.
	NotifyFleetPaused NotifyEvent = "fleet_paused"
)

// AllNotifyEvents lists every NotifyEvent.
func AllNotifyEvents() []NotifyEvent {
	return []NotifyEvent{NotifyEscalation, NotifyFailure, NotifyDailyCap, NotifyFleetPaused}
}

// NotifySinkKind is how a sink is called.
type NotifySinkKind string

// The built-in sink kinds (BuiltinSinkKinds); a process may register more (SinkRegistry).
const (
	// SinkWebhook POSTs the notification as JSON, signed with HMAC-SHA256 of the body.
	SinkWebhook NotifySinkKind = "webhook"
	// SinkSlack POSTs a Slack-compatible incoming-webhook message ({"text": ...}).
	SinkSlack NotifySinkKind = "slack"
)

// AllNotifySinkKinds lists the built-in NotifySinkKinds.
func AllNotifySinkKinds() []NotifySinkKind { return []NotifySinkKind{SinkWebhook, SinkSlack} }

// TriggerEvent is the forge event a trigger subscribes to.
type TriggerEvent string

// The trigger events.
const (
	// TriggerCheckFailed: a check (commit status or check run) failed on the head of a branch.
	TriggerCheckFailed TriggerEvent = "check_failed"
	// TriggerLabeled: an issue or a pull request got a label.
	TriggerLabeled TriggerEvent = "labeled"
)

// AllTriggerEvents lists every trigger event.
func AllTriggerEvents() []TriggerEvent { return []TriggerEvent{TriggerCheckFailed, TriggerLabeled} }

// BuildCacheScope says who shares a Go build cache that sandboxed commands write. A build
// cache is code: an entry one command planted is linked into what another compiles, so a
// cache is shared only by commands that already trust each other.
type BuildCacheScope string

// The build cache scopes.
const (
	// BuildCacheRepository (the default): one cache per repository, kept by the worker across
	// that repository's items and attempts. Items of one repository run its code anyway.
	BuildCacheRepository BuildCacheScope = "repository"
	// BuildCacheWorkspace: each workspace its own, removed with it: no attempt can change what
	// another compiles, at the cost of a cold cache per attempt.
	BuildCacheWorkspace BuildCacheScope = "workspace"
	// BuildCacheShared: the worker's own GOCACHE, warm for every repository — and an item of
	// one repository can plant entries that another repository's build links. An explicit
	// opt-in for deployments whose repositories all trust each other.
	BuildCacheShared BuildCacheScope = "shared"
)

// BuildCacheScopes lists the build_cache settings.
func BuildCacheScopes() []BuildCacheScope {
	return []BuildCacheScope{BuildCacheRepository, BuildCacheWorkspace, BuildCacheShared}
}

// SandboxMode says whether commands run in the sandbox (proc implements each).
type SandboxMode string

// The sandbox modes.
const (
	SandboxBwrap SandboxMode = "bwrap" // bubblewrap; items are refused where it cannot start
	SandboxOff   SandboxMode = "off"   // unconfined (only the guard and the scrubbed environment)
)

// SandboxNetwork says what network a sandboxed command has.
type SandboxNetwork string

// The sandbox networks.
const (
	NetworkNone SandboxNetwork = "none" // own empty network namespace: no Redis, no loopback services
	// NetworkRegistries: no network of its own either, only the worker's allowlisting proxy
	// (package egress) through a bridge: the package registries and config.Sandbox.Allow.
	NetworkRegistries SandboxNetwork = "registries"
	NetworkHost       SandboxNetwork = "host" // the host's network (exec agents must reach their model)
)

// SandboxModes lists the sandbox modes.
func SandboxModes() []SandboxMode { return []SandboxMode{SandboxBwrap, SandboxOff} }

// SandboxNetworks lists the sandbox network settings.
func SandboxNetworks() []SandboxNetwork {
	return []SandboxNetwork{NetworkNone, NetworkRegistries, NetworkHost}
}

// Limit names one resource limit.
type Limit string

// The limits.
const (
	LimitMemory    Limit = "memory"
	LimitProcesses Limit = "processes"
	LimitCPUTime   Limit = "cpu_time"
	LimitFileSize  Limit = "file_size"
)

// LimitExceededMessage says that what (a command) was stopped by the sandbox's limit l, set to
// value, and names the setting that would allow more.
func LimitExceededMessage(what string, l Limit, value string) string {
	return fmt.Sprintf("%s exceeded the sandbox's %s limit (%s); raise sandbox: {limits: {%s: …}} to allow more",
		what, l, value, l)
}

// JoinKinds lists a vocabulary's values for a message: "a, b, c".
func JoinKinds[T ~string](ks []T) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
