// Package verify owns the verifier: it turns an attempt's claim of "done" into a decision
// (close, retry with a changed condition, or escalate) based on evidence only.
//
// Evidence comes from:
//   - test reports: go test -json (ParseGoJSON), JUnit XML (ParseJUnit), TAP 13/14 (ParseTAP),
//     read by streaming parsers with bounded memory, and jest/vitest JSON (ParseJestJSON, one
//     document, bounded at 64 MiB), each a Format in a Formats registry (BuiltinFormats; a
//     process adds its own with With and WithFormats, docs/extending.md); auto detection asks
//     the registered formats in order, from the content, never from the file name. Each parser detects the tool (Report.Flavor) and counts by its convention
//     (Conventions, listed in POLICY.md);
//   - the exit codes of the template's done-check commands (sh -c in the workspace, own process
//     group, killed with their children on timeout);
//   - the workspace's diff against the attempt's base commit (CollectDiff: allowed paths, size
//     limits, secret-looking additions);
//   - CI checks for the workspace's HEAD, read from the template's forge (ForgeCI over package
//     forge: GitHub check runs and commit statuses, Gitea commit statuses), or results any CI
//     system posts to POST /api/evidence (EvidenceHandler, RedisCIStore).
//
// The decision policy is one ordered table (Rules) plus the checks every retry passes (Guards);
// POLICY.md is generated from them. Every decision names its rule, reasons, evidence references
// and, for failures, a signature used to spot the same failure repeating. Secret-looking text is
// redacted from everything a decision records.
//
// The worker calls Verifier.Verify after each attempt; an agent loop may call Verifier.Check
// mid-attempt; `outerloop verify --report` calls RunCLI, which takes everything the policy uses
// as files (--exit-code, --ci, --diff, --template), so a decision replays offline from the
// evidence files the verifier keeps per attempt (WithEvidenceStore, EvidenceFilesHandler,
// ReplayDir). Fixtures in testdata come from real
// tools (testdata/gen.sh); BENCHMARKS.md compares the go test -json parser with gotestsum's.
package verify
