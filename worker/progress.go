package worker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"outerloop/proc"
	"outerloop/verify"
	"outerloop/workitems"
)

// Live output of a running command: its elapsed time and a bounded tail reach the item's events
// (and so the console's item page and `outerloop items ID --follow`) every few seconds, so that
// a long step does not look hung. The tail is redacted like every recorded output.

// LiveTailLines and LiveTailBytes bound the tail a progress event carries.
const (
	LiveTailLines = 20
	LiveTailBytes = 4 << 10
)

// LiveTail returns the last LiveTailLines lines of out, at most LiveTailBytes, redacted.
func LiveTail(out string) string {
	out = strings.TrimRight(out, "\n")
	if len(out) > LiveTailBytes {
		out = "…" + strings.ToValidUTF8(out[len(out)-LiveTailBytes:], "")
	}
	if lines := strings.Split(out, "\n"); len(lines) > LiveTailLines {
		out = "…\n" + strings.Join(lines[len(lines)-LiveTailLines:], "\n")
	}
	return proc.Redact(out)
}

// ProgressEvent is the step event of a command that has run for elapsed, with its output so
// far: what names the command (index of, or the agent), and its live tail.
func ProgressEvent(what string, data map[string]string, elapsed time.Duration, out string) workitems.Event {
	tail := LiveTail(out)
	last := tail
	if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
		last = tail[i+1:]
	}
	d := map[string]string{"kind": string(workitems.KindCommandProgress), "elapsed": elapsed.Round(time.Second).String(), "tail": tail}
	for k, v := range data {
		d[k] = v
	}
	msg := fmt.Sprintf("%s running for %s", what, elapsed.Round(time.Second))
	if last != "" {
		msg += ": " + last
	}
	return workitems.Event{Type: workitems.EventStep, Message: msg, Data: d}
}

// withCheckProgress makes the verifier's running done-check commands report to events as
// progress events ("done check: CMD running for 40s: last line").
func withCheckProgress(ctx context.Context, events EventSink, every time.Duration) context.Context {
	return verify.WithCommandProgress(ctx, func(cmd string, elapsed time.Duration, out string) {
		cmd = proc.Redact(cmd)
		events.Emit(ctx, ProgressEvent("done check: "+cmd, map[string]string{"check": cmd}, elapsed, out))
	}, every)
}
