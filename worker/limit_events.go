package worker

import (
	"outerloop/proc"
	"outerloop/workitems"
)

// LimitExceeded returns the event of a command that a resource limit stopped (ok false when
// none did): kind limit_exceeded with the limit, its value as configured and the command.
func LimitExceeded(command string, res proc.Result, p proc.Policy) (workitems.Event, bool) {
	if res.Limit == "" {
		return workitems.Event{}, false
	}
	value := p.Limits.Written.Get(res.Limit)
	return workitems.Event{Type: workitems.EventStep, Message: workitems.LimitExceededMessage(command, res.Limit, value),
		Data: map[string]string{"kind": string(workitems.KindLimitExceeded), "limit": string(res.Limit), "value": value, "command": command}}, true
}
