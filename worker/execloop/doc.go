// Package execloop owns the `exec` inner loop: it runs an external coding agent (Codex,
// Claude Code, aider, or any command) as one attempt of an item, under outerloop's budgets,
// checkpoints and exit reasons.
//
// One run, for every agent:
//
//	start (own process group, scrubbed env, prompt on stdin or --message)
//	  → read stdout line by line: parse → event → charge meter → checkpoint
//	      ├─ meter says a cap is reached  → kill group → budget_exhausted (+kind)
//	      ├─ wall-time deadline           → kill group → budget_exhausted wall_time
//	      ├─ ctx cancelled                → kill group → aborted
//	      └─ checkpoint fenced out        → kill group → aborted (class conflict)
//	  → leader exits → kill what it left → EOF → exit from the parsed final event
//
// The exit reason comes from the agent's final event (Codex turn.completed / turn.failed,
// Claude Code's result), never from its exit status alone. A kill stops the whole process
// group and every descendant found under /proc (agents run commands in sessions of their
// own), then waits until each has exited.
//
// See README.md for configuring each agent and what is measured.
package execloop
