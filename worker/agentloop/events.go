package agentloop

import "outerloop/workitems"

// AllEventKinds lists the kinds of step event (workitems.EventKind, Data["kind"]) the agent
// loop writes to the item's log, in the order a turn usually writes them. A turn writes one
// turn_started and exactly one of turn_completed, turn_aborted and turn_error (none when its
// lease was lost). command_progress is a shell tool call still running, its elapsed time and
// output tail (worker.ProgressEvent, every WithProgressEvery).
func AllEventKinds() []workitems.EventKind {
	return []workitems.EventKind{workitems.KindTurnStarted, workitems.KindModelRequest, workitems.KindStreamError,
		workitems.KindToolCall, workitems.KindToolOutput, workitems.KindCommandProgress, workitems.KindCompaction,
		workitems.KindStopHook, workitems.KindWarning, workitems.KindTurnCompleted, workitems.KindTurnAborted,
		workitems.KindTurnError}
}
