package workitems

import "time"

// EventType names a kind of event in an item's log.
type EventType string

// The event types the core writes. Inner loops add their own step events (type "step" with
// a Kind in Data) through the worker's event sink.
const (
	EventCreated         EventType = "created"
	EventState           EventType = "state"
	EventAttemptStarted  EventType = "attempt_started"
	EventAttemptResumed  EventType = "attempt_resumed"
	EventStep            EventType = "step"
	EventAttemptExited   EventType = "attempt_exited"
	EventVerified        EventType = "verified"
	EventDecision        EventType = "decision"
	EventEscalated       EventType = "escalated"
	EventResolved        EventType = "resolved"
	EventSteer           EventType = "steer"
	EventLeaseLost       EventType = "lease_lost"
	EventWarning         EventType = "warning"
	EventEnqueueRepaired EventType = "enqueue_repaired"
	// Workspaces: where an attempt's workspace came from, how a resume restored it (or why the
	// attempt started over), and when a worker removed it.
	EventWorkspacePrepared EventType = "workspace_prepared"
	EventWorkspaceRestored EventType = "workspace_restored"
	EventAttemptRestarted  EventType = "attempt_restarted"
	EventWorkspaceRemoved  EventType = "workspace_removed"
)

// Event is one entry of an item's event log. Data holds small, secret-free facts.
type Event struct {
	ID      string            `json:"id,omitempty"` // stream id, set on read
	Item    string            `json:"item"`
	Type    EventType         `json:"type"`
	Attempt int               `json:"attempt,omitempty"`
	From    State             `json:"from,omitempty"`
	To      State             `json:"to,omitempty"`
	Message string            `json:"message,omitempty"`
	Actor   string            `json:"actor,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
	At      time.Time         `json:"at"`
}
