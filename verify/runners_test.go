package verify

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestRunnerFixtures runs the decision on every real-tool fixture of issue 27 (googletest,
// Catch2, cargo, rspec, PHPUnit, bats, Test::More/prove; testdata/gen.sh lists the versions) with
// and without the test command's exit status, and checks the rule, the counts, the flavour and
// the conventions applied.
func TestRunnerFixtures(t *testing.T) {
	t.Parallel()
	const none = -1 // no exit status given
	cases := []struct {
		file        string
		exit        int // the tool's real exit status, or none
		flavor      string
		rule        workitems.RuleName
		ran, bad    int
		skipped     int
		conventions []string
		failing     []string
		reason      string // a substring of the first reason
	}{
		// googletest: DISABLED_ tests and GTEST_SKIP are skips, not ctest's not-run errors.
		{"junit/gtest-green.xml", 0, "gtest", "all_green", 1, 0, 3, []string{ConvGtestDisabled}, nil, ""},
		{"junit/gtest-green.xml", none, "gtest", "all_green", 1, 0, 3, []string{ConvGtestDisabled}, nil, ""},
		{"junit/gtest-fail.xml", 1, "gtest", "tests_failed", 2, 1, 3, nil, []string{"Math.Divides"}, "Expected equality"},
		// A failing SetUpTestSuite: its tests are written as skipped, never started.
		{"junit/gtest-setup.xml", 1, "gtest", "tests_failed", 2, 1, 3, []string{ConvGtestNotRun}, []string{"Db.Query"}, "not started"},
		{"junit/gtest-setup.xml", none, "gtest", "tests_failed", 2, 1, 3, []string{ConvGtestNotRun}, []string{"Db.Query"}, "not started"},
		// A failing global environment: an error outside any test; nothing started.
		{"junit/gtest-env.xml", 1, "gtest", "tests_failed", 3, 3, 2, []string{ConvGtestEnv, ConvGtestNotRun},
			[]string{"Math.Adds", "Math.SkipsOnPurpose", "NonTestSuiteFailure.(environment)"}, ""},
		// Catch2: tests= counts assertions.
		{"junit/catch2-green.xml", 0, "catch2", "all_green", 3, 0, 0, []string{ConvCatch2Asserts}, nil, ""},
		{"junit/catch2-green.xml", none, "catch2", "all_green", 3, 0, 0, []string{ConvCatch2Asserts}, nil, ""},
		{"junit/catch2-fail.xml", 1, "catch2", "tests_failed", 4, 1, 0, []string{ConvCatch2Asserts}, []string{"catch2-sample.global.divides"}, "7 / 2 == 4"},
		{"junit/catch2-throw.xml", 1, "catch2", "tests_failed", 4, 1, 0, nil, []string{"catch2-sample.global.connects"}, "cannot connect"},
		{"junit/catch2-nomatch.xml", 0, "catch2", "zero_tests", 0, 0, 0, nil, nil, ""},
		// [!mayfail] and [!shouldfail] tests that fail, as they may (Catch2 exits 0): skipped.
		{"junit/catch2-mayfail.xml", 0, "catch2", "all_green", 3, 0, 2, []string{ConvCatch2MayFail, ConvCatch2Asserts}, nil, ""},
		{"junit/catch2-mayfail.xml", none, "catch2", "all_green", 3, 0, 2, []string{ConvCatch2MayFail}, nil, ""},
		// cargo: ignored tests counted, not listed (so not among the observed skips); a crashed
		// binary leaves no document.
		{"junit/cargo-green.xml", 0, "cargo", "all_green", 4, 0, 0, []string{ConvCargoIgnored, ConvConcatenated}, nil, ""},
		{"junit/cargo-green.xml", none, "cargo", "exit_status_unknown", 4, 0, 0, []string{ConvCargoCrash}, nil, "crashed"},
		{"junit/cargo-fail.xml", 101, "cargo", "tests_failed", 3, 1, 0, nil, []string{"tests.divides"}, "integer division"},
		{"junit/cargo-fail.xml", none, "cargo", "tests_failed", 3, 1, 0, nil, []string{"tests.divides"}, "integer division"},
		{"junit/cargo-abort.xml", 101, "cargo", "command_failed", 3, 0, 0, nil, nil, ""},
		{"junit/cargo-abort.xml", none, "cargo", "exit_status_unknown", 3, 0, 0, nil, nil, "--exit-code"},
		// rspec: pending is a skip; errors outside examples are only in the exit status.
		{"junit/rspec-green.xml", 0, "rspec", "all_green", 4, 0, 3, []string{ConvRspecPending}, nil, ""},
		{"junit/rspec-green.xml", none, "rspec", "exit_status_unknown", 4, 0, 3, []string{ConvRspecOutside}, nil, "outside examples"},
		{"junit/rspec-after.xml", 1, "rspec", "command_failed", 4, 0, 3, nil, nil, ""},
		{"junit/rspec-after.xml", none, "rspec", "exit_status_unknown", 4, 0, 3, nil, nil, "cannot tell"},
		{"junit/rspec-fail.xml", 1, "rspec", "tests_failed", 4, 1, 3, nil, []string{"spec.calc_spec.Calc divides"}, "expected: 4"},
		{"junit/rspec-hook.xml", 1, "rspec", "tests_failed", 4, 1, 3, nil, []string{"spec.calc_spec.Calc with a database queries"}, "cannot connect"},
		{"junit/rspec-fixed.xml", 1, "rspec", "tests_failed", 5, 1, 3, nil, []string{"spec.calc_spec.Calc parses"}, "pending"},
		{"junit/rspec-load.xml", 1, "rspec", "zero_tests", 0, 0, 0, nil, nil, ""},
		// PHPUnit: nested suites, assertions=, skipped and incomplete, risky and warnings pass.
		{"junit/phpunit-green.xml", 0, "phpunit", "all_green", 8, 0, 2, []string{ConvPHPUnitCounts}, nil, ""},
		{"junit/phpunit-odd.xml", 0, "phpunit", "all_green", 8, 0, 2, []string{ConvPHPUnitRisky}, nil, ""},
		{"junit/phpunit-fail.xml", 1, "phpunit", "tests_failed", 8, 1, 2, nil, []string{"CalcTest.testDivides"}, "Failed asserting that 3 is identical to 4"},
		{"junit/phpunit-error.xml", 2, "phpunit", "tests_failed", 8, 1, 2, nil, []string{"CalcTest.testThrows"}, "RuntimeException: cannot connect"},
		{"junit/phpunit-setup.xml", 2, "phpunit", "tests_failed", 8, 1, 2, nil, []string{"DbTest.testQuery"}, "fixture server did not start"},
		// bats: JUnit and TAP.
		{"junit/bats-green.xml", 0, "bats", "all_green", 3, 0, 1, nil, nil, ""},
		{"junit/bats-fail.xml", 1, "bats", "tests_failed", 3, 1, 1, nil, []string{"sample.bats.divides"}, "failed"},
		{"junit/bats-missing.xml", 1, "bats", "tests_failed", 3, 1, 1, nil, []string{"sample.bats.runs the tool"}, ""},
		{"junit/bats-setup.xml", 1, "bats", "tests_failed", 1, 1, 0, []string{ConvBatsSetupFile}, []string{"sample.bats.(setup_file)"}, "return 1"},
		{"tap/bats-green.tap", 0, "", "all_green", 3, 0, 1, nil, nil, ""},
		{"tap/bats-fail.tap", 1, "bats", "tests_failed", 3, 1, 1, []string{ConvBatsTAPDiag}, []string{"divides"}, "sample.bats, line 18) `[ $((7 / 2)) -eq \"$want\" ]' failed"},
		{"tap/bats-missing.tap", 1, "bats", "tests_failed", 3, 1, 1, []string{ConvBatsTAPDiag}, []string{"runs the tool"}, "line 29"},
		// A failing setup_file is bats' one point: an error, its diagnostics the message.
		{"tap/bats-setup.tap", 1, "bats", "tests_failed", 1, 1, 0, []string{ConvBatsSetupFile, ConvBatsTAPDiag}, []string{"setup_file failed"}, "`return 1' failed fixture server did not start"},
		{"tap/bats-setup.tap", none, "bats", "tests_failed", 1, 1, 0, []string{ConvBatsSetupFile}, []string{"setup_file failed"}, "setup_file"},
		// Test::More: skip and todo; a failure after the last test seen only in a diagnostic. Its
		// diagnostics name the flavour; a green stream without a TODO has none.
		{"tap/perl-green.tap", 0, "test-more", "all_green", 2, 0, 2, []string{ConvTAPTodo}, nil, ""},
		{"tap/perl-fail.tap", 1, "test-more", "tests_failed", 2, 1, 0, []string{ConvTestMoreDiag}, []string{"divides"}, "divides: Failed test 'divides' at fail.t line 7. got: '3' expected: '4'"},
		{"tap/perl-dies.tap", 255, "test-more", "tests_failed", 4, 1, 0, []string{ConvTAPExitStatus}, []string{"(exit)"}, "exited with 255"},
		{"tap/perl-dies.tap", none, "test-more", "tests_failed", 4, 1, 0, []string{ConvTAPExitStatus}, []string{"(exit)"}, "exited with 255"},
		{"tap/perl-dies-done.tap", none, "test-more", "tests_failed", 3, 1, 0, []string{ConvTAPExitStatus}, []string{"(exit)"}, "exited with 3"},
		// The program's stdout alone: only the exit status shows the failure, so without it the
		// green stream does not close; with 0 it can, with 255 it never does.
		{"tap/perl-dies-stdout.tap", 255, "", "command_failed", 3, 0, 0, nil, nil, ""},
		{"tap/perl-dies-stdout.tap", none, "", "exit_status_unknown", 3, 0, 0, []string{ConvTAPOutside}, nil, "--exit-code"},
		{"tap/perl-dies-stdout.tap", 0, "", "all_green", 3, 0, 0, []string{ConvTAPOutside}, nil, ""},
		{"tap/perl-green.tap", none, "test-more", "exit_status_unknown", 2, 0, 2, []string{ConvTAPOutside}, nil, "TAP stream"},
		{"tap/bats-green.tap", none, "", "exit_status_unknown", 3, 0, 1, []string{ConvTAPOutside}, nil, "cannot tell"},
		{"tap/perl-skip-all.tap", 0, "", "zero_tests", 0, 0, 0, nil, nil, ""},
		// prove's JUnit: skipped and todo points read from the suite's TAP; a non-zero exit.
		{"junit/prove-perl.xml", 1, "prove-junit", "tests_failed", 12, 4, 2, []string{ConvProveDirective, ConvSuiteError},
			[]string{"dies-done_t.(suite)", "dies_t.(suite)", "fail_t.(suite)", "fail_t.2 - divides"}, ""},
		// ctest: a test that exits with its SKIP_RETURN_CODE is a deliberate skip.
		{"junit/ctest-skip.xml", 0, "ctest", "all_green", 2, 0, 2, []string{ConvCtestSkipCode, ConvCtestDisabled}, nil, ""},
	}
	for _, c := range cases {
		name := c.file
		if c.exit == none {
			name += " without exit status"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseFile("testdata/"+c.file, FormatAuto, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, ReportExpected: true,
				Template: &config.Template{MaxAttempts: 3}, Reports: []*Report{r}}
			if c.exit != none {
				f.Commands = []CommandResult{{Command: "the test command", ExitCode: c.exit}}
			}
			d := decide(f)
			if d.Rule != c.rule {
				t.Errorf("rule %s (%q), want %s; %s, conventions %v, warnings %q", d.Rule, d.Reasons, c.rule, r.Summary(), r.Conventions, r.Warnings)
			}
			if !strings.Contains(d.Reasons[0], c.reason) {
				t.Errorf("reason %q lacks %q", d.Reasons[0], c.reason)
			}
			if r.Flavor != c.flavor {
				t.Errorf("flavor %q, want %q", r.Flavor, c.flavor)
			}
			o := r.Observed
			if ran := o.Total - o.Skipped; ran != c.ran || o.Bad() != c.bad || o.Skipped != c.skipped {
				t.Errorf("ran %d bad %d skipped %d, want %d, %d and %d (%s)", ran, o.Bad(), o.Skipped, c.ran, c.bad, c.skipped, r.Summary())
			}
			for _, conv := range c.conventions {
				if !slices.Contains(r.Conventions, conv) {
					t.Errorf("conventions %v lack %s", r.Conventions, conv)
				}
			}
			if c.failing != nil && !slices.Equal(r.Failing(), c.failing) {
				t.Errorf("failing %q, want %q", r.Failing(), c.failing)
			}
			if ok, why := r.CountsAgree(); !ok && r.Complete {
				t.Errorf("counts disagree under the reporter's conventions: %s", why)
			}
			if d.Outcome == workitems.OutcomeClose && (c.exit > 0 || o.Bad() > 0) {
				t.Errorf("closed a run that failed")
			}
		})
	}
}

// TestCatch2ShouldFailPasses: a [!shouldfail] test that passes fails Catch2's run (exit 1,
// failures="1") while no case shows a failure; the report contradicts itself and never closes.
func TestCatch2ShouldFailPasses(t *testing.T) {
	t.Parallel()
	r, err := ParseFile("testdata/junit/catch2-shouldfail-passes.xml", FormatAuto, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmds := range [][]CommandResult{nil, {{Command: "the test command", ExitCode: 1}}} {
		d := decide(&Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, ReportExpected: true,
			Template: &config.Template{MaxAttempts: 3}, Reports: []*Report{r}, Commands: cmds})
		if d.Outcome == workitems.OutcomeClose || !strings.Contains(d.Reasons[0], "failures declared 1, found 0") {
			t.Errorf("commands %v: %s (%q), want no close, naming the failure count", cmds, d.Rule, d.Reasons)
		}
	}
}

// TestRunFailedBeforeItsReport: output of a run that ended before its reporter wrote anything
// (issue 27's errors outside any test: a cargo crate that does not compile, a Catch2 listener
// or global constructor that throws) is not a report, says why, and never closes, whatever the
// exit status given.
func TestRunFailedBeforeItsReport(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		exit int // the tool's real exit status
		want string
	}{
		{"console/cargo-compile.txt", 101, "could not compile"},
		{"console/catch2-static.txt", 134, "uncaught C++ exception"},
		{"junit/catch2-listener.xml", 255, "never wrote the report"},
	} {
		_, err := ParseFile("testdata/"+c.file, FormatAuto, Limits{})
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want not a report, saying %q", c.file, err, c.want)
		}
		for _, exit := range []int{c.exit, 0} {
			var out bytes.Buffer
			code, err := RunCLI(context.Background(), &out, []string{"testdata/" + c.file}, CLIOptions{ExitCode: &exit})
			if err != nil || code != 1 || !strings.Contains(out.String(), "decision: retry — no test report") || !strings.Contains(out.String(), c.want) {
				t.Errorf("%s, exit %d: code %d err %v, output %q", c.file, exit, code, err, out.String())
			}
		}
	}
}

// TestConsoleOutputIsNotAReport: a runner's console output is never read as a report; the
// error names the runner and the option that writes a report.
func TestConsoleOutputIsNotAReport(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"console/prove.txt":   "prove --formatter TAP::Formatter::JUnit",
		"console/cargo.txt":   "cargo test -- -Z unstable-options --format junit",
		"console/rspec.txt":   "rspec --format RspecJunitFormatter",
		"console/phpunit.txt": "phpunit --log-junit",
		"console/gtest.txt":   "--gtest_output=xml",
		"console/catch2.txt":  "--reporter junit",
		"console/bats.txt":    "bats --formatter junit",
	} {
		_, err := ParseFile("testdata/"+file, FormatAuto, Limits{})
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not a report") {
			t.Errorf("%s: %v; want not a report, naming %q", file, err, want)
		}
		var out bytes.Buffer
		code, err := RunCLI(context.Background(), &out, []string{"testdata/" + file}, CLIOptions{})
		if err != nil || code != 1 || !strings.Contains(out.String(), "decision: retry — no test report") || !strings.Contains(out.String(), want) {
			t.Errorf("%s: code %d err %v, output %q", file, code, err, out.String())
		}
	}
}

// TestTAPFlavourByDiagnostics: only a diagnostic that Test::More or bats alone writes names the
// flavour, and only then do the comments after a failing point become its message (another
// producer's trailing comments, such as node's summary, are not a failure's message).
func TestTAPFlavourByDiagnostics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, tap, flavor, message string
	}{
		{"plain TAP keeps its comments apart", "1..2\nok 1 - a\nnot ok 2 - b\n# tests 2\n# fail 1\n", "", ""},
		{"a version line names the flavour first", "TAP version 13\n1..1\nnot ok 1 - b\n#   Failed test 'b'\n", "tap13", ""},
		{"Test::More's diagnostics end at its summary", "1..1\nnot ok 1 - b\n#   Failed test 'b'\n#   at t/b.t line 3.\n# Looks like you failed 1 test of 1.\n",
			"test-more", "Failed test 'b' at t/b.t line 3."},
		{"a passing point takes no diagnostics", "1..2\nnot ok 1 - a\nok 2 - b\n#   Failed test 'a'\n", "test-more", ""},
		{"bats' diagnostics", "1..1\nnot ok 1 b\n# (in test file x.bats, line 4)\n#   `false' failed\n", "bats", "(in test file x.bats, line 4) `false' failed"},
	} {
		r, err := ParseReport(strings.NewReader(c.tap), c.name, FormatAuto, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		for _, tc := range r.Tests {
			if tc.Final().Bad() {
				msg = tc.FirstBad().Message
			}
		}
		if r.Flavor != c.flavor || msg != c.message {
			t.Errorf("%s: flavour %q, message %q; want %q and %q", c.name, r.Flavor, msg, c.flavor, c.message)
		}
	}
}
