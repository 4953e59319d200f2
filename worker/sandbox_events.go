package worker

import (
	"context"
	"fmt"
	"strconv"

	"outerloop/worker/proc"
	"outerloop/workitems"
)

// Step events the sandbox's own doing leaves in an item's log, so that an escalation can say
// when a failure was the sandbox's (a refused connection, a limit) and name the setting that
// would allow it. Data keys are the same for every command kind.
const (
	// EventKindNetworkRefused: the egress proxy refused a connection of a command.
	// Data: host, port, reason (not_allowed | private_address | resolve_failed), command.
	EventKindNetworkRefused = "network_refused"
	// EventKindLimitExceeded: a command hit a resource limit and was stopped or refused by it.
	// Data: limit (memory | processes | cpu_time | file_size), value (the configured limit as
	// written), command.
	EventKindLimitExceeded = "limit_exceeded"
)

// networkRefused returns what records a refused connection of one of the attempt's commands:
// a step event on the item (EventKindNetworkRefused) and the metric.
func (h *Handler) networkRefused(template string, events EventSink) func(proc.NetworkRefusal) {
	return func(nr proc.NetworkRefusal) {
		h.o.Observer.NetworkRefused(template, string(nr.Reason))
		events.Emit(context.Background(), workitems.Event{Type: workitems.EventStep,
			Message: fmt.Sprintf("sandbox network refused %s:%d (%s) to command %q; sandbox: {allow: [...]} adds a host",
				nr.Host, nr.Port, nr.Reason, nr.Command),
			Data: map[string]string{"kind": EventKindNetworkRefused, "host": nr.Host, "port": strconv.Itoa(nr.Port),
				"reason": string(nr.Reason), "command": nr.Command}})
	}
}
