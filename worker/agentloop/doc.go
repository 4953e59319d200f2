// Package agentloop owns the native agent inner loop (`loop.kind: agent`): one attempt is one
// turn wrapper around an explicit phase machine that samples a model, runs the tools it asks
// for inside the attempt's workspace, decides whether to follow up, compacts the context when
// it grows past the template's limit, and passes a stop gate before it claims completion.
//
// # Phases
//
//	            ┌──────────────────────────────────────────────┐
//	            ▼                                              │
//	Preparing ─► Sampling ─► JoiningTools ─► Deciding ─────────┤ needs follow-up, context fits
//	    ▲                                      │   │           │
//	    │                                      │   └─► Compacting (needs follow-up, over limit)
//	    │                                      ▼
//	    └──────── block with a prompt ──── StopGate ─► Completed
//
//	any non-terminal phase ─► Aborted       (context cancelled: person, shutdown)
//	any non-terminal phase ─► ErrorClosing  (unrecoverable model error, budget cap, no progress)
//
// [Transition] is the one function that says which edges exist; [AllPhases] lists the phases.
// The phase is only the control position: history, the budget meter, the checkpointer, pending
// steer input and the workspace fingerprint live on the runtime object of one Run.
//
// # Invariants
//
//  1. All tool calls of one response are joined in call order (each gets an output, or an
//     explicit "aborted" output) before Deciding.
//  2. Deciding uses needs_follow_up = model_needs_follow_up || has_pending_input, where the
//     model needs follow-up when it called tools or answered with end_turn=false.
//  3. Compacting runs only when follow-up is needed and the context is over
//     Template.Loop.ContextLimitTokens; it returns to Preparing in the same turn. When the
//     model itself needed the follow-up, the first request after compaction continues the
//     model's chain and queued steer input waits for the request after it (the drain gate).
//  4. StopGate: a hook blocks only with a non-empty prompt, recorded as a user message and
//     sampled next with stop_hook_active=true; prompts of several blocking hooks are merged,
//     in hook order, into one message. An empty block is ignored with a warning. The same
//     continuation twice in a row (stop_hook_active set) exits no_progress; a command hook
//     that cannot run (exit 126/127, or its interpreter cannot open the script) exits failed,
//     class not_found: a configuration error.
//  5. Every sampling request is built from recorded history, and the tools it offers are the
//     tools calls are routed to (a call to anything else gets an error observation).
//  6. Exactly one terminal event per run; an aborted turn appends an interruption marker to
//     history before turn_aborted.
//  7. A checkpoint is written after every transition (history appended, never rewritten).
//     Resume works from Checkpointer.Load alone; a tool call started but without a recorded
//     output gets "interrupted; outcome unknown" and is not re-run.
//  8. Transient model errors are retried up to 5 times with model.RetryDelay (a server-given
//     delay wins), each retry rebuilt from recorded history.
//
// # Checkpoints and resume
//
// Every save writes the control state (phase, step, spend, the tool-call ledger, pending
// steer input, the stop-hook flag, workspace fingerprints, no-progress counters) and appends
// the history items recorded since the last save; history is never rewritten. Compaction
// appends a hand-off summary and moves the request view's start past the compacted items.
// A run with a checkpoint resumes from Checkpointer.Load alone: the phase it was in is run
// again (a sampling step that was not recorded is sent again from the same history), calls
// the ledger marks as started get "interrupted; outcome unknown", calls not started run. A
// completed attempt returns its recorded exit; an aborted or error-closed one continues from
// Preparing with the interruption visible in history.
//
// # Budgets
//
// Every model call, tool call, token, dollar and loop step is charged to the attempt's
// worker.Meter. Reaching a cap does not undo what just happened; it refuses the next action
// that would spend, and a turn that reaches the stop gate at a cap does not complete: the run
// checkpoints and exits budget_exhausted naming the cap. Near a cap (80%) the model gets one
// wrap-up notice per budget kind. The same failing tool call (name, arguments, output)
// repeated Template.Loop.NoProgressLimit times exits no_progress.
//
// # Events
//
// Every event is a workitems.Event of type "step" whose Data["kind"] is one of:
//
//	turn_started    {turn, resumed, step, phase}
//	model_request   {sampling (n-th request of the turn), step, input_items, tools}
//	stream_error    {attempt, max, delay, class, error}; Message "reconnecting n/N"
//	tool_call       {call_id, name, arguments (truncated)}
//	tool_output     {call_id, name, failed, bytes}
//	command_progress {tool: shell, elapsed, tail}; a shell call still running, every WithProgressEvery
//	compaction      {input_items, summary_chars}
//	stop_hook       {hook, decision, reason}
//	warning         {budget | hook}; Message says why (wrap-up notice, empty block, hook failure)
//	turn_completed  {last_message}                                   terminal
//	turn_aborted    {reason}                                         terminal
//	turn_error      {reason, class, budget, message, context_full}   terminal: failed,
//	                transient_error, budget_exhausted, no_progress
//
// Every event also carries {turn}: the item id and attempt number.
//
// When the checkpointer reports workitems.ErrLeaseLost the run stops at once and writes
// nothing more — no checkpoint, no event — and returns an aborted exit of class conflict.
//
// # Tools
//
// read_file, list_dir, search, write_file and apply_patch are confined to the workspace through
// an os.Root: `..`, absolute paths and symlinks pointing out are refused with an error
// observation and touch nothing. apply_patch takes the Codex patch format (see patch.go).
// shell runs `sh -c` in the workspace with a timeout, bounded output, a scrubbed environment,
// and its whole process group killed on cancel; it is not a sandbox. run_done_check runs the
// template's done check (worker.DoneChecker) and is offered only when there is one.
package agentloop
