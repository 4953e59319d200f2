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
		{ConvCtestNotRun, "ctest", "a case with `status=\"notrun\"` (\"Unable to find executable\", \"Not Run\") is an error whatever its `<skipped>`: a test that did not run is not a pass"},
		{ConvCtestDisabled, "ctest", "a case with `status=\"disabled\"` is skipped; the declared skipped count is accepted with or without the `disabled=` count added (ctest versions differ)"},
		{ConvTAPTodo, "tap", "`not ok … # TODO` is an expected failure (skipped); a plan that does not match the points, or a bail out, makes the report incomplete"},
		{ConvTAPRepeat, "tap", "points with the same name (tape names its points by assertion) are runs of one test in one invocation: one failing point fails the test"},
		{ConvJSONTodo, "jest-json", "in `jest --json` / `vitest --reporter=json`, `todo`, `pending` and `skipped` are skipped and `disabled` is skipped"},
		{ConvJSONTotals, "jest-json", "`numTotalTests` counts every assertion result, todos and pending included; `numFailedTests` the failed ones; a suite that failed to run (`numRuntimeErrorTestSuites`, a suite with a message and no results) is an error case `<file>.(suite)`"},
		{ConvConcatenated, "junit", "several XML documents in one file (reports concatenated by a CI step) are read one after the other; their declared totals add up"},
	}
}
