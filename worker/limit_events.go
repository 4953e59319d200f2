package worker

import (
	"fmt"

	"outerloop/worker/proc"
	"outerloop/workitems"
)

// LimitExceeded returns the event of a command that a resource limit stopped (ok false when
// none did): kind limit_exceeded with the limit, its value as configured and the command.
func LimitExceeded(command string, res proc.Result, p proc.Policy) (workitems.Event, bool) {
	if res.Limit == "" {
		return workitems.Event{}, false
	}
	value := p.Limits.Written.Get(res.Limit)
	return workitems.Event{Type: workitems.EventStep, Message: LimitMessage(command, res.Limit, value),
		Data: map[string]string{"kind": EventKindLimitExceeded, "limit": string(res.Limit), "value": value, "command": command}}, true
}

// LimitMessage says that command was stopped by the sandbox's limit and names the setting that
// would allow more.
func LimitMessage(command string, l workitems.Limit, value string) string {
	return fmt.Sprintf("%s exceeded the sandbox's %s limit (%s); raise sandbox: {limits: {%s: …}} to allow more",
		command, l, value, l)
}
