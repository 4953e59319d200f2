// Package verify owns the verifier: it turns an attempt's claim of "done" into a decision
// (close, retry with a changed condition, or escalate) based on evidence only.
//
// Evidence comes from test reports (go test -json, JUnit XML, TAP, parsed by streaming parsers
// with bounded memory), the exit codes of the template's done-check commands, the workspace's
// diff against the attempt's base commit, and CI checks (GitHub check runs and commit statuses,
// or results posted to the evidence webhook). The decision policy is one ordered table of rules
// (policy.go, documented in POLICY.md); every decision names the rule that fired, its reasons and
// the evidence it used.
//
// The worker calls Verifier.Verify after each attempt; the agent loop may call Verifier.Check to
// run the done check mid-attempt; the CLI calls RunCLI.
package verify
