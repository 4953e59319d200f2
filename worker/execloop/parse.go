package execloop

import (
	"strconv"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// step is what one line of an agent's output amounts to: an event for the item's log, spend
// to charge, and what it tells about the session and the end of the run.
type step struct {
	Kind    workitems.EventKind // event kind: agent_message, command, file_change, turn_completed, result, unknown…
	Message string              // one short, secret-free line for the event log
	Data    map[string]string   // small facts for the event
	Spend   workitems.Spend     // delta to charge to the meter
	Session string              // the agent's session/thread id, when this line names it
	Warning bool                // a malformed line: reported as a warning event, not fatal
}

// parser turns an agent's stdout, line by line, into steps and, at the end, an exit. It keeps
// whatever it needs to judge the run from the final event (never from the exit code alone).
type parser interface {
	// Line parses one line (without its newline); ok false means the line is not a step.
	Line(line []byte) (s step, ok bool)
	// Exit judges the run once stdout has ended: from the final event when one was seen,
	// else from the exit code (code) and stderr's tail.
	Exit(code int, stderrTail string) workitems.Exit
	// Last returns the agent's latest message so far (its claim), or "".
	Last() string
}

// maxField bounds each string put into an event, so a huge command output cannot bloat the log.
const maxField = 240

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string { return shorten.Clip(strings.TrimSpace(s), n) }

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// classifyMessage maps an agent's own error text to an exit: provider trouble that may pass
// with time is transient; bad credentials are permission; the rest fail. Agents report these
// only as text, so this is the one place that reads text to classify.
func classifyMessage(msg string) workitems.Exit {
	m := strings.ToLower(msg)
	has := func(markers ...string) bool {
		for _, s := range markers {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("401", "403", "unauthorized", "forbidden", "invalid api key", "invalid x-api-key", "authentication"):
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission, Message: clip(msg, 500)}
	case has("429", "rate limit", "rate_limit", "overloaded", "500", "502", "503", "504", "529",
		"internal server error", "bad gateway", "service unavailable", "timeout", "timed out",
		"stream disconnected", "connection", "reconnecting", "temporarily", "try again"):
		return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient, Message: clip(msg, 500)}
	case has("400", "invalid_request", "invalid request", "not supported", "unsupported"):
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvalidInput, Message: clip(msg, 500)}
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown, Message: clip(msg, 500)}
}

// noFinal is the exit of a run whose stream ended without a final event.
func noFinal(agent string, code int, stderrTail string) workitems.Exit {
	msg := agent + " exited without a final event"
	if code != 0 {
		msg = agent + " exited with status " + strconv.Itoa(code) + " without a final event"
	}
	if stderrTail != "" {
		msg += ": " + clip(stderrGist(stderrTail), 500)
	}
	e := classifyMessage(stderrTail)
	e.Message = msg
	return e
}

// cost returns the USD cost of s's tokens under p (USD per million tokens; cached input at
// its own price). Agents that report no cost (Codex) are charged this.
func cost(p config.Prices, s workitems.Spend) float64 {
	uncached := max(0, s.InputTokens-s.CachedInputTokens)
	return (float64(uncached)*p.InputPerMTok + float64(s.CachedInputTokens)*p.CachedInputPerMTok +
		float64(s.OutputTokens)*p.OutputPerMTok) / 1e6
}

// stderrGist picks what explains a failure from a program's stderr: the first line that says
// "error" (usage errors come before the usage text), else the last lines.
func stderrGist(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			return strings.TrimSpace(l)
		}
	}
	return lastLines(s, 5)
}
