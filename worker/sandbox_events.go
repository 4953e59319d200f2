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

// Step events the sandbox's own doing leaves in an item's log (workitems.KindNetworkRefused,
// workitems.KindLimitExceeded: their Data is documented there), so that an escalation can say
// when a failure was the sandbox's (a refused connection, a limit) and name the setting that
// would allow it. Data keys are the same for every command kind.

// networkRefused returns what records a refused connection of one of the attempt's commands,
// or a count of them (proc.NetworkRefusal): a step event on the item (workitems.KindNetworkRefused)
// and the metric, which counts every refused connection.
func (h *Handler) networkRefused(template string, events EventSink) func(proc.NetworkRefusal) {
	return func(nr proc.NetworkRefusal) {
		n := max(nr.Count, 1)
		h.o.Observer.NetworkRefused(template, string(nr.Reason), n)
		data := map[string]string{"kind": string(workitems.KindNetworkRefused), "host": nr.Host, "port": strconv.Itoa(nr.Port),
			"reason": string(nr.Reason), "command": nr.Command, "count": strconv.Itoa(n)}
		msg := fmt.Sprintf("sandbox network refused %s:%d (%s%s) to command %q", nr.Host, nr.Port, nr.Reason, refusalHint(nr.Reason), nr.Command)
		switch {
		case nr.Others:
			data["others"], data["counted"], data["host"], data["port"] = "true", "true", "", ""
			msg = fmt.Sprintf("sandbox network refused %d connection(s) to other destinations, past those counted one by one (%s%s), to command %q",
				n, nr.Reason, refusalHint(nr.Reason), nr.Command)
		case nr.Counted:
			data["counted"] = "true"
			msg = fmt.Sprintf("sandbox network refused %s:%d %d time(s) not reported one by one (%s%s) to command %q",
				nr.Host, nr.Port, n, nr.Reason, refusalHint(nr.Reason), nr.Command)
		}
		events.Emit(context.Background(), workitems.Event{Type: workitems.EventStep, Message: msg, Data: data})
	}
}

// maxRefusedListed bounds the destinations a pull request's body lists.
const maxRefusedListed = 20

// refusedOf returns the connections the sandbox refused to attempt n's commands, each
// destination once, from the item's events (an execution that resumed the attempt sees its
// predecessor's too).
func (h *Handler) refusedOf(ctx context.Context, id string, n int, log *slog.Logger) []string {
	evs, err := h.o.Store.Events(ctx, id, "", 5000, 0)
	if err != nil {
		log.Warn("events unreadable: the pull request will not list refused connections", "err", err)
		return nil
	}
	return refusedList(evs, n)
}

// refusedList lists the destinations of attempt n's network_refused events, each once and at
// most maxRefusedListed of them; a last entry says how many more there were.
func refusedList(evs []workitems.Event, n int) []string {
	var out []string
	more := 0
	for _, e := range evs {
		if e.Attempt != n || e.Data["kind"] != string(workitems.KindNetworkRefused) {
			continue
		}
		s := fmt.Sprintf("%s:%s (%s)", e.Data["host"], e.Data["port"], e.Data["reason"])
		if e.Data["others"] == "true" {
			s = fmt.Sprintf("other destinations (%s)", e.Data["reason"])
		}
		switch {
		case slices.Contains(out, s):
		case len(out) < maxRefusedListed:
			out = append(out, s)
		default:
			more++ // may count a destination twice: the list has no room to remember it
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and more (%d further events: see the item's events)", more))
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
