package agentloop

import "outerloop/worker"

// EventKind is the "kind" of a step event the agent loop writes to the item's log.
type EventKind string

// The event kinds. A turn writes one turn_started and exactly one of turn_completed,
// turn_aborted and turn_error (none when its lease was lost).
const (
	EventTurnStarted   EventKind = "turn_started"
	EventModelRequest  EventKind = "model_request"
	EventStreamError   EventKind = "stream_error" // a transient error, retried
	EventToolCall      EventKind = "tool_call"
	EventToolOutput    EventKind = "tool_output"
	EventCompaction    EventKind = "compaction"
	EventStopHook      EventKind = "stop_hook"
	EventWarning       EventKind = "warning"
	EventTurnCompleted EventKind = "turn_completed"
	EventTurnAborted   EventKind = "turn_aborted"
	EventTurnError     EventKind = "turn_error"
	// EventCommandProgress: a shell tool call still running, its elapsed time and output tail
	// (worker.ProgressEvent, every WithProgressEvery).
	EventCommandProgress EventKind = worker.EventKindProgress
)

// AllEventKinds lists every event kind, in the order a turn usually writes them.
func AllEventKinds() []EventKind {
	return []EventKind{EventTurnStarted, EventModelRequest, EventStreamError, EventToolCall, EventToolOutput,
		EventCommandProgress, EventCompaction, EventStopHook, EventWarning, EventTurnCompleted, EventTurnAborted, EventTurnError}
}
