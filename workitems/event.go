package workitems

import "time"

// EventType names a kind of event in an item's log.
type EventType string

// The event types: every Event.Type any package writes is one of these (AllEventTypes; a test
// of internal/vocab fails on an EventType constant or literal outside it). Inner loops add
// their own events as type step (or warning) with an EventKind in Data["kind"].
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
	// EventWaiting and EventWoken frame a wait on the item's log (Data: kind (a WaitKind), sha,
	// pr, deadline; woken: by, kind, seq).
	EventWaiting EventType = "waiting"
	EventWoken   EventType = "woken"
	// EventDelivery is a step of the delivery flow (Data: step (a DeliveryStep), and what the
	// step knows).
	EventDelivery EventType = "delivery"
	// EventForgeRefused is a forge event refused on the item (Actor: "forge:user"; Data: refused
	// (a ForgeRefusal), action, pr (the event's pull request, ForgePR.String)).
	EventForgeRefused EventType = "forge_refused"
	// EventRerun is written to an item's log when a person re-runs it; Data["rerun"] is the new
	// item's id.
	EventRerun EventType = "rerun"
	// EventDeleted is written to the deployment-wide event log when an item is deleted.
	EventDeleted EventType = "deleted"
	// EventAlertResolved: Alertmanager said the item's alert group resolved (Data: resolved_at,
	// group_key, effect: cancelled or noted).
	EventAlertResolved EventType = "alert_resolved"
)

// AllEventTypes lists every event type.
func AllEventTypes() []EventType {
	return []EventType{EventCreated, EventState, EventAttemptStarted, EventAttemptResumed, EventStep,
		EventAttemptExited, EventVerified, EventDecision, EventEscalated, EventResolved, EventSteer,
		EventLeaseLost, EventWarning, EventEnqueueRepaired, EventWorkspacePrepared, EventWorkspaceRestored,
		EventAttemptRestarted, EventWorkspaceRemoved, EventWaiting, EventWoken, EventDelivery,
		EventForgeRefused, EventRerun, EventDeleted, EventAlertResolved}
}

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
