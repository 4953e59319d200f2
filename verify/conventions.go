package verify

// Reporter conventions: what each tool's report means by its entries and totals. Real tools
// disagree on what a test is (a file, a hook, a todo, a benchmark) and on what their totals
// count, so the parsers detect the tool (Report.Flavor) and apply its rule; the rule's name is
// recorded in Report.Conventions. A contradiction no rule explains still never closes an item.

// The convention names.
const (
	ConvGoInvocation   = "gojson-invocation"
	ConvGoBenchmark    = "gojson-benchmark"
	ConvGoPackage      = "gojson-package-failure"
	ConvGotestsumMain  = "gotestsum-testmain"
	ConvJUnitRepeat    = "junit-repeated-case"
	ConvSurefireRerun  = "surefire-rerun"
	ConvSuiteError     = "junit-suite-error"
	ConvAntSuiteCase   = "ant-suite-case"
	ConvJestTodo       = "jest-junit-todo"
	ConvPytestTeardown = "pytest-teardown-error"
	ConvMochaPending   = "mocha-pending"
	ConvNodeFile       = "node-file-entry"
	ConvNodeTodo       = "node-junit-todo"
	ConvCtestNotRun    = "ctest-notrun"
	ConvCtestDisabled  = "ctest-disabled"
	ConvTAPTodo        = "tap-todo"
	ConvTAPRepeat      = "tap-repeated-point"
	ConvJSONTodo       = "jest-json-todo"
	ConvJSONTotals     = "jest-json-totals"
	ConvConcatenated   = "junit-concatenated"
	ConvCtestSkipCode  = "ctest-skip-code"
	ConvGtestDisabled  = "gtest-disabled"
	ConvGtestNotRun    = "gtest-not-started"
	ConvGtestEnv       = "gtest-environment"
	ConvCatch2Asserts  = "catch2-assertions"
	ConvCatch2MayFail  = "catch2-mayfail"
	ConvCargoIgnored   = "cargo-ignored"
	ConvCargoCrash     = "cargo-crashed-binary"
	ConvRspecPending   = "rspec-pending"
	ConvRspecOutside   = "rspec-outside-examples"
	ConvPHPUnitCounts  = "phpunit-assertions"
	ConvPHPUnitRisky   = "phpunit-risky"
	ConvBatsSetupFile  = "bats-setup-file"
	ConvTAPExitStatus  = "tap-exit-status"
	ConvTAPOutside     = "tap-outside-points"
	ConvTestMoreDiag   = "test-more-diagnostics"
	ConvBatsTAPDiag    = "bats-tap-diagnostics"
	ConvProveDirective = "prove-junit-directive"
	ConvMissingCount   = "junit-missing-count"
	ConvCTConfig       = "common-test-config"
	ConvProveVerbose   = "prove-verbose"
)

// Convention is one reporter's counting rule.
type Convention struct {
	Name   string
	Flavor string // the detected flavour it applies to (Report.Flavor), or the format
	Rule   string // in words (POLICY.md lists these)
}

// Conventions returns every reporter convention the parsers apply, for POLICY.md.
func Conventions() []Convention {
	return []Convention{
		{ConvGoInvocation, "gojson", "runs of a test inside one package run (`go test -count=N`) are one invocation: a failure in any of them fails the test; only a package that starts again (gotestsum `--rerun-fails`) is a rerun, so only then is fail-then-pass flaky"},
		{ConvGoBenchmark, "gojson", "a benchmark (`Benchmark…`) with a `run` event and no `pass` event ran to its end: it is not a test, neither a pass nor an unfinished test (a benchmark-only run has zero tests); a crashed benchmark fails its package"},
		{ConvGoPackage, "gojson", "a package that fails with no failing test (TestMain, os.Exit, init panic) is one error case `<pkg>.(package)`"},
		{ConvGotestsumMain, "gotestsum", "the `TestMain` case with an empty classname that gotestsum's JUnit adds for a failing package is an error, left out of the test totals as gotestsum's suite totals leave it out"},
		{ConvJUnitRepeat, "junit", "several testcase elements with one id are runs in one invocation (pytest's call failure plus teardown error, `go test -count=N` through a converter): a failure among them fails the test, it is never flaky"},
		{ConvSurefireRerun, "surefire", "`flakyFailure`/`flakyError` are failed reruns before the final pass (flaky); `rerunFailure`/`rerunError` failed reruns after the first failure (failing)"},
		{ConvSuiteError, "junit", "an `<error>` or `<failure>` directly in a `<testsuite>`, outside any case (prove's bad plan or exit status, a failing beforeAll/BeforeClass), is an error case `<suite>.(suite)`, outside the totals' test count, and its declared error count is not compared (tools count these problems their own way)"},
		{ConvAntSuiteCase, "ant", "the case with classname `junit.framework.TestSuite` that Ant writes for a failing @BeforeClass is an error outside the test count (`tests=\"0\"`)"},
		{ConvJestTodo, "jest-junit", "a `test.todo` is listed as a case without a result and left out of `tests=`: cases with no result and `time=\"0\"`, as many as the totals leave out, are todos (skipped)"},
		{ConvPytestTeardown, "pytest", "a teardown error of a test that passed is counted by pytest as one more test: each such error adds one to the listed count"},
		{ConvMochaPending, "mocha-junit", "pending tests are counted in `tests=` and `skipped=` but not listed: the unlisted ones are taken as skipped"},
		{ConvNodeFile, "node", "`node --test` reports a test file that defines no tests as one passing test named by the file's path: that entry is not a test (a failing one, a file that did not load, stays a failure)"},
		{ConvNodeTodo, "node", "a JUnit case with both `<skipped type=\"todo\">` and `<failure>` is a failing todo: skipped, not failed"},
		{ConvCtestNotRun, "ctest", "a case with `status=\"notrun\"` (\"Unable to find executable\", a failed fixture or dependency) is an error whatever its `<skipped>`: a test that did not run is not a pass (`ctest-skip-code` is the one exception)"},
		{ConvCtestSkipCode, "ctest", "a `notrun` case whose `<skipped message>` is `SKIP_RETURN_CODE=N` or `SKIP_REGULAR_EXPRESSION_MATCHED` ran and skipped itself on purpose (the test's skip exit code, automake's 77): skipped"},
		{ConvCtestDisabled, "ctest", "a case with `status=\"disabled\"` is skipped; the declared skipped count is accepted with or without the `disabled=` count added (ctest versions differ)"},
		{ConvTAPTodo, "tap", "`not ok … # TODO` is an expected failure (skipped); a plan that does not match the points, or a bail out, makes the report incomplete"},
		{ConvTAPRepeat, "tap", "points with the same name (tape names its points by assertion) are runs of one test in one invocation: one failing point fails the test"},
		{ConvJSONTodo, "jest-json", "in `jest --json` / `vitest --reporter=json`, `todo`, `pending` and `skipped` are skipped and `disabled` is skipped"},
		{ConvJSONTotals, "jest-json", "`numTotalTests` counts every assertion result, todos and pending included; `numFailedTests` the failed ones; a suite that failed to run (`numRuntimeErrorTestSuites`, a suite with a message and no results) is an error case `<file>.(suite)`"},
		{ConvGtestDisabled, "gtest", "a `DISABLED_` test (`status=\"notrun\" result=\"suppressed\"`) is skipped, not ctest's not-run error; `tests=` counts it and `disabled=` is their number, while a `GTEST_SKIP` (`result=\"skipped\"`) is counted only in its suite's `skipped=` (the root has none)"},
		{ConvGtestNotRun, "gtest", "a `result=\"skipped\"` case with the epoch timestamp never started: its suite's `SetUpTestSuite` or a global environment failed, and googletest 1.12 writes that failure nowhere else in the XML (a deliberate `GTEST_SKIP` has its start time): an error, outside the declared error count"},
		{ConvGtestEnv, "gtest", "the nameless case of the `NonTestSuiteFailure` suite is a failure outside any test (a global environment's `SetUp`): an error case `NonTestSuiteFailure.(environment)`, outside the totals"},
		{ConvCatch2Asserts, "catch2", "Catch2's `tests=`, `failures=` and `errors=` count assertions (expressions), not test cases (one case per leaf section, `case/section`): they are read as bounds, tests ≥ the cases listed and failures or errors non-zero exactly when a case failed or errored. Catch2 2.x has no runtime skip (`SKIP()` came in Catch2 3.3): a hidden test (`[.]`) is neither run nor listed, so no skip shows in its report. An error outside any test leaves no report (a global constructor that throws: `std::terminate`) or an XML declaration alone (a listener that throws when the run starts; the JUnit is written when the run ends): not a report, never a close"},
		{ConvCatch2MayFail, "catch2", "a `[!mayfail]` or `[!shouldfail]` test that failed is written with `<skipped message=\"TEST_CASE tagged with !mayfail\"/>` next to its `<failure>` and left out of `failures=`, and Catch2 exits 0: skipped (allowed to fail). A `[!shouldfail]` test that passes fails the run (exit 1, `failures=\"1\"`) with no case saying so: a contradiction, never a close"},
		{ConvCargoIgnored, "cargo", "libtest's JUnit (`cargo test -- -Z unstable-options --format junit`) leaves `#[ignore]` tests out of the cases while counting them in `tests=` and `skipped=`: the unlisted ones are skipped; each test binary (unit, integration, doc tests) writes its own document (`junit-concatenated`)"},
		{ConvCargoCrash, "cargo", "a test binary writes its document only when it finishes, so one that crashes (abort, segfault, stack overflow) leaves no trace in the report: without the test command's exit status such a report never closes (`exit_status_unknown`). A crate that does not compile runs no test binary and writes nothing on stdout (the compiler's errors are on stderr): not a report, never a close"},
		{ConvRspecPending, "rspec", "`pending`, `skip` and `xit` examples are `<skipped/>` (a failing pending body is expected); a pending example that passes is a failure (`PendingExampleFixedError`)"},
		{ConvRspecOutside, "rspec", "rspec_junit_formatter does not report errors outside examples (a failing `after(:context)` hook; a spec file that does not load leaves `tests=\"0\"`): without the test command's exit status a green report never closes (`exit_status_unknown`)"},
		{ConvPHPUnitCounts, "phpunit", "`assertions=` counts assertions and `tests=` tests (each data set is a test, listed in a nested `Class::method` suite); nested suites' totals are inside their parent's; an exception in `setUpBeforeClass` is an `<error>` of each test of the class"},
		{ConvPHPUnitRisky, "phpunit", "a risky test (`<error type=\"PHPUnit\\Framework\\RiskyTestError\">`, e.g. no assertions) and a `<warning>` pass, as PHPUnit passes them (exit 0 without `--fail-on-risky` / `--fail-on-warning`); risky tests are left out of the `errors=` comparison"},
		{ConvBatsSetupFile, "bats", "a failing `setup_file` is one nameless case (`name=\"\"`, `tests=\"1\"`) in bats' JUnit: an error case `<file>.(setup_file)`; its TAP says `not ok 1 setup_file failed` with the plan unmet: that point is an error, not a test's failure"},
		{ConvTAPExitStatus, "tap", "a diagnostic saying the test program exited non-zero or died after its points (Test::More: `# Looks like your test exited with 255 just after 3.`, `# Looks like your test died …`) is an error case `(exit)`, wherever it comes (usually after the plan)"},
		{ConvTAPOutside, "tap", "a TAP stream shows only its points: a program that dies or exits non-zero after a complete plan leaves a green stream when its diagnostics went to stderr (Test::More's `# Looks like your test …`, a shell script's `set -e`): without the test command's exit status a green TAP report never closes (`exit_status_unknown`)"},
		{ConvTestMoreDiag, "test-more", "TAP from Test::More (or Test2) is told by its diagnostics (`#   Failed test 'x'`, `# Looks like you failed N tests of M.`, `# Looks like your test exited with N`), so only a stream with a failure or a TODO shows its flavour; the comments right after a failing point (`#   at t/x.t line N.`, got/expected) are that point's failure message, up to the `# Looks like` summary"},
		{ConvBatsTAPDiag, "bats", "`bats --tap` is told by its diagnostics (`# (in test file x.bats, line N)`, `# (from function …`, `# bats warning: …`), so only a stream with a failure shows its flavour; the comments right after a failing point (the file, line and failed command, the test's output) are its failure message; its points have no ` - ` before the name"},
		{ConvProveDirective, "prove-junit", "TAP::Formatter::JUnit lists skipped and todo points as plain passing cases; their directive is read from the TAP in the suite's `<system-out>` (`ok 3 # skip`, `not ok 4 # TODO`): skipped"},
		{ConvMissingCount, "junit", "a count attribute an element leaves out is unknown, not zero: `disabled=` alone does not declare the skipped count (jasmine-reporters 2.5 writes `disabled=\"0\"` and no `skipped=` on its root while its cases carry `<skipped/>` for pending specs), and a count the root leaves out is taken from its suites when every one of them declares it"},
		{ConvCTConfig, "common-test", "Common Test's surefire hook (`ct_run -ct_hooks cth_surefire`, common_test 1.23) lists the configuration functions `init_per_suite`, `end_per_suite`, `init_per_group` and `end_per_group` as cases (a group's as `init_per_group(<group>)`), while `tests=` counts only the test cases: when the declared count leaves out exactly the cases so named, they are not tests. One that passed, or was skipped after another failed, is dropped; one that failed is an error case outside the totals (the hook counts it nowhere: `failures=\"0\"`, and the test cases it prepares are listed as skipped), so the run never closes"},
		{ConvProveVerbose, "prove", "`prove -v`'s console output (TAP::Harness 3.44) is read: each test program's TAP between prove's `t/x.t .. ` headers is a stream of its own, its tests named `<program>.<test>`; prove's verdict after a stream (`Dubious, test returned N`, `No subtests run`) is an error case `<program>.(exit)`, a `skipped: why` program is skipped; the `Result: PASS|FAIL` line is prove's exit status (it exits non-zero exactly on FAIL), so a green run closes without another and a FAIL never does; output without the `Result:` line was cut off and never closes. Lines between a verdict and the next header (a program's stderr, written out of order) are not read. prove without `-v` shows no TAP: not a report"},
		{ConvConcatenated, "junit", "several XML documents in one file (reports concatenated by a CI step) are read one after the other; their declared totals add up"},
	}
}
