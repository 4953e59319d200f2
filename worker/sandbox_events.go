package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"outerloop/egress"
	"outerloop/proc"
	"outerloop/workitems"
)

// Step events the sandbox's own doing leaves in an item's log, so that an escalation can say
// when a failure was the sandbox's (a refused connection, a limit) and name the setting that
// would allow it. Data keys are the same for every command kind.
const (
	// EventKindNetworkRefused: the egress proxy refused a connection of a command.
	// Data: host, port, reason (not_allowed | private_address | resolve_failed | origin_form |
	// bad_target), command.
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
			Message: fmt.Sprintf("sandbox network refused %s:%d (%s%s) to command %q", nr.Host, nr.Port, nr.Reason, refusalHint(nr.Reason), nr.Command),
			Data: map[string]string{"kind": EventKindNetworkRefused, "host": nr.Host, "port": strconv.Itoa(nr.Port),
				"reason": string(nr.Reason), "command": nr.Command}})
	}
}

// maxRefusedListed bounds the refusals a pull request's body lists.
const maxRefusedListed = 20

// refusedOf returns the connections the sandbox refused to attempt n's commands, each once,
// from the item's events (an execution that resumed the attempt sees its predecessor's too).
func (h *Handler) refusedOf(ctx context.Context, id string, n int, log *slog.Logger) []string {
	evs, err := h.o.Store.Events(ctx, id, "", 5000, 0)
	if err != nil {
		log.Warn("events unreadable: the pull request will not list refused connections", "err", err)
		return nil
	}
	var out []string
	for _, e := range evs {
		if e.Attempt != n || e.Data["kind"] != EventKindNetworkRefused {
			continue
		}
		s := fmt.Sprintf("%s:%s (%s)", e.Data["host"], e.Data["port"], e.Data["reason"])
		if !slices.Contains(out, s) && len(out) < maxRefusedListed {
			out = append(out, s)
		}
	}
	return out
}

// refusalHint says what would allow a refused connection, when a setting would.
func refusalHint(r egress.Reason) string {
	switch r {
	case egress.ReasonNotAllowed:
		return ": add the host to the template's sandbox: {allow: [...]}, or set network: host"
	case egress.ReasonPrivateAddress:
		return ": it resolves only to loopback, private, link-local or metadata addresses, which the proxy never reaches"
	case egress.ReasonOriginForm:
		return ": the command sent the proxy a request for a path (origin form), as if the proxy were the server; the proxy carries only absolute http:// URIs and CONNECT"
	case egress.ReasonBadTarget:
		return ": the proxy carries only absolute http:// URIs and CONNECT to host:port"
	}
	return ""
}
