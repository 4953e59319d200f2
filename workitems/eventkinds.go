package workitems

// EventKind is what an event's Data["kind"] says happened: the kind of a step (or warning)
// event an inner loop, the worker or the store writes, the WaitKind of a waiting or woken
// event, the BaseKind of a workspace_prepared event. Every kind any package writes is in
// AllEventKinds; a test of internal/vocab scans the repository's code for Data["kind"] values
// and fails on one outside it.
type EventKind string

// The event kinds, by who writes them.
const (
	// The agent loop (worker/agentloop; its package doc says each one's Data). A turn writes one
	// turn_started and exactly one of turn_completed, turn_aborted and turn_error.
	KindTurnStarted   EventKind = "turn_started"
	KindModelRequest  EventKind = "model_request"
	KindStreamError   EventKind = "stream_error" // a transient error, retried
	KindToolCall      EventKind = "tool_call"
	KindToolOutput    EventKind = "tool_output"
	KindCompaction    EventKind = "compaction"
	KindStopHook      EventKind = "stop_hook"
	KindWarning       EventKind = "warning"
	KindTurnCompleted EventKind = "turn_completed"
	KindTurnAborted   EventKind = "turn_aborted"
	KindTurnError     EventKind = "turn_error"

	// The worker, for every loop. KindCommandProgress: a command still running, its elapsed
	// time and output tail (worker.ProgressEvent).
	KindCommandProgress EventKind = "command_progress"
	// KindNetworkRefused: the egress proxy refused a connection of a command.
	// Data: host, port, reason (not_allowed | private_address | resolve_failed | origin_form |
	// bad_target), command, count (the refused connections it stands for: 1 as one happens;
	// at the command's end, those counted while it ran), counted ("true" for such a count),
	// others ("true" for the count of destinations past those counted one by one: host and
	// port are empty).
	KindNetworkRefused EventKind = "network_refused"
	// KindLimitExceeded: a command hit a resource limit and was stopped or refused by it.
	// Data: limit (memory | processes | cpu_time | file_size), value (the configured limit as
	// written), command.
	KindLimitExceeded EventKind = "limit_exceeded"

	// The script loop (worker/scriptloop): each command's start and end.
	KindCommandStarted  EventKind = "command_started"
	KindCommandFinished EventKind = "command_finished"

	// The store: a decision to retry planned the next attempt (Data: changed).
	KindRetryPlanned EventKind = "retry_planned"

	// The exec loop (worker/execloop): the agent's process, then what its output says.
	KindStarted   EventKind = "started"
	KindResumed   EventKind = "resumed"
	KindRestarted EventKind = "restarted"
	KindKilled    EventKind = "killed"
	KindExited    EventKind = "exited"
	// What an external agent's output lines are read as (codex, claude, aider, a command).
	KindThreadStarted EventKind = "thread_started"
	KindTurnFailed    EventKind = "turn_failed"
	KindAgentMessage  EventKind = "agent_message"
	KindReasoning     EventKind = "reasoning"
	KindThinking      EventKind = "thinking"
	KindCommand       EventKind = "command"
	KindFileChange    EventKind = "file_change"
	KindMCPToolCall   EventKind = "mcp_tool_call"
	KindWebSearch     EventKind = "web_search"
	KindItemError     EventKind = "item_error"
	KindToolUse       EventKind = "tool_use"
	KindToolResult    EventKind = "tool_result"
	KindInit          EventKind = "init"
	KindSystem        EventKind = "system"
	KindAssistant     EventKind = "assistant"
	KindUser          EventKind = "user"
	KindResult        EventKind = "result"
	KindUsage         EventKind = "usage"
	KindCommit        EventKind = "commit"
	KindError         EventKind = "error"
	KindMalformed     EventKind = "malformed" // a line that is not the agent's format (a warning event)
	KindUnknown       EventKind = "unknown"   // a line of the format not known to outerloop
)

// AllEventKinds lists every event kind: the constants above, then the wait kinds (waiting and
// woken events) and the base kinds (workspace_prepared events).
func AllEventKinds() []EventKind {
	out := []EventKind{KindTurnStarted, KindModelRequest, KindStreamError, KindToolCall, KindToolOutput,
		KindCompaction, KindStopHook, KindWarning, KindTurnCompleted, KindTurnAborted, KindTurnError,
		KindCommandProgress, KindNetworkRefused, KindLimitExceeded, KindCommandStarted, KindCommandFinished,
		KindRetryPlanned, KindStarted, KindResumed, KindRestarted, KindKilled, KindExited,
		KindThreadStarted, KindTurnFailed, KindAgentMessage, KindReasoning, KindThinking, KindCommand,
		KindFileChange, KindMCPToolCall, KindWebSearch, KindItemError, KindToolUse,
		KindToolResult, KindInit, KindSystem, KindAssistant, KindUser, KindResult, KindUsage, KindCommit,
		KindError, KindMalformed, KindUnknown}
	for _, k := range AllWaitKinds() {
		out = append(out, EventKind(k))
	}
	for _, k := range AllBaseKinds() {
		out = append(out, EventKind(k))
	}
	return out
}
