package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestReporterFixtures runs the decision on every real-tool fixture of issue 13 and checks the
// rule it lands on, the counts and the conventions applied. Each fixture comes from the tool
// (testdata/gen.sh lists the versions).
func TestReporterFixtures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file        string
		flavor      string
		rule        workitems.RuleName // the deciding rule
		ran         int                // tests that ran (not skipped)
		bad         int
		conventions []string
		failing     []string
	}{
		// False closes that must not happen.
		{"gojson/count-fail.json", "", "tests_failed", 2, 1, []string{ConvGoInvocation}, []string{"fixtures/flaky.TestSometimes"}},
		{"junit/node-empty.xml", "node", "zero_tests", 0, 0, []string{ConvNodeFile}, nil},
		{"tap/node-empty.tap", "tap13", "zero_tests", 0, 0, []string{ConvNodeFile}, nil},
		{"junit/ctest-notrun.xml", "ctest", "tests_failed", 3, 1, []string{ConvCtestNotRun, ConvCtestDisabled}, []string{"missing_exe"}},
		{"junit/ctest-fail.xml", "ctest", "tests_failed", 3, 1, []string{ConvCtestDisabled}, []string{"fails"}},
		// Missed closes and false escalations.
		{"gojson/bench.json", "", "all_green", 1, 0, []string{ConvGoBenchmark}, nil},
		{"gojson/bench-only.json", "", "zero_tests", 0, 0, []string{ConvGoBenchmark}, nil},
		{"junit/ctest-green.xml", "ctest", "all_green", 2, 0, []string{ConvCtestDisabled}, nil},
		{"junit/jest-todo.xml", "jest-junit", "all_green", 1, 0, []string{ConvJestTodo}, nil},
		{"junit/mocha-pending.xml", "mocha-junit", "all_green", 1, 0, []string{ConvMochaPending}, nil},
		{"junit/prove-green.xml", "prove-junit", "all_green", 2, 0, nil, nil},
		{"junit/ant-GreenTest.xml", "ant", "all_green", 1, 0, nil, nil},
		// pytest-rerunfailures: a rerun that passed; its JUnit keeps only the final run.
		{"junit/pytest-rerun.xml", "pytest", "all_green", 2, 0, nil, nil},
		{"junit/node.xml", "node", "tests_failed", 4, 2, []string{ConvNodeTodo}, []string{"test.compares objects", "test.divides"}},
		// Real failures next to a reporter's own way of counting: retried with the failures.
		{"junit/pytest-teardown.xml", "pytest", "tests_failed", 2, 1, []string{ConvPytestTeardown}, []string{"test_green.test_teardown_errors"}},
		{"junit/prove-badplan.xml", "prove-junit", "tests_failed", 5, 1, []string{ConvSuiteError}, []string{"badplan_t.(suite)"}},
		{"junit/mocha-hook.xml", "mocha-junit", "tests_failed", 2, 1, nil, nil},
		{"junit/ant-SetupTest.xml", "ant", "tests_failed", 1, 1, []string{ConvAntSuiteCase}, []string{"junit.framework.TestSuite.SetupTest"}},
		{"junit/gotestsum-testmain.xml", "gotestsum", "tests_failed", 6, 1, []string{ConvGotestsumMain}, []string{"fixtures/testmain.TestMain"}},
		// jest and vitest JSON, BOM, CRLF TAP, concatenated JUnit.
		{"jestjson/jest-green.json", "jest-json", "all_green", 1, 0, []string{ConvJSONTotals, ConvJSONTodo}, nil},
		{"jestjson/jest-fail.json", "jest-json", "tests_failed", 3, 1, nil, nil},
		{"jestjson/vitest-green.json", "vitest-json", "all_green", 1, 0, nil, nil},
		{"jestjson/vitest-fail.json", "vitest-json", "tests_failed", 2, 1, nil, nil},
		{"gojson/bom.json", "", "all_green", 4, 0, nil, nil},
		// Green TAP without the exit status: the stream cannot show a failure after its points.
		{"tap/tape-crlf.tap", "tap13", "exit_status_unknown", 1, 0, []string{ConvTAPRepeat, ConvTAPOutside}, nil},
		{"tap/bom-crlf.tap", "tap13", "exit_status_unknown", 1, 0, nil, nil},
		{"tap/tape.tap", "tap13", "tests_failed", 2, 1, nil, []string{"objects differ"}},
		{"junit/concatenated.xml", "ant", "all_green", 3, 0, []string{ConvConcatenated, ConvCtestDisabled}, nil},
		// Issue 43: green runs that escalated. jasmine-reporters: no skipped= on the root (unknown,
		// not zero) while pending specs are listed as <skipped/>.
		{"junit/jasmine-green.xml", "", "all_green", 3, 0, []string{ConvMissingCount}, nil},
		// Common Test's surefire hook lists configuration functions as cases; tests= does not
		// count them. A failing one is an error (its test cases are skipped): never a close.
		{"junit/ct-green.xml", "common-test", "all_green", 3, 0, []string{ConvCTConfig}, nil},
		{"junit/ct-fail.xml", "common-test", "tests_failed", 3, 1, []string{ConvCTConfig}, []string{"sample_SUITE.divides"}},
		{"junit/ct-suite.xml", "common-test", "tests_failed", 1, 1, []string{ConvCTConfig}, []string{"sample_SUITE.init_per_suite"}},
		{"junit/ct-group.xml", "common-test", "tests_failed", 2, 1, []string{ConvCTConfig}, []string{"sample_SUITE.init_per_group(math)"}},
		// prove -v's console output: each program's TAP, prove's verdicts and its Result line.
		{"console/prove-v-green.txt", "prove", "all_green", 2, 0, []string{ConvProveVerbose, ConvTAPTodo}, nil},
		{"console/prove-v-fail.txt", "prove", "tests_failed", 5, 2, []string{ConvProveVerbose}, []string{"fail.t.(exit)", "fail.t.divides"}},
		{"console/prove-v.txt", "prove", "tests_failed", 6, 1, []string{ConvProveVerbose}, []string{"dies.t.(exit)"}},
		{"junit/jasmine-fail.xml", "", "tests_failed", 3, 1, []string{ConvMissingCount}, []string{"calc.multiplies"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			r, err := ParseFile("testdata/"+c.file, FormatAuto, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, ReportExpected: true,
				Template: &config.Template{MaxAttempts: 3}, Reports: []*Report{r}}
			d := decide(f)
			if d.Rule != c.rule {
				t.Errorf("rule %s (%q), want %s; %s, conventions %v, warnings %q", d.Rule, d.Reasons, c.rule, r.Summary(), r.Conventions, r.Warnings)
			}
			if r.Flavor != c.flavor {
				t.Errorf("flavor %q, want %q", r.Flavor, c.flavor)
			}
			if ran := r.Observed.Total - r.Observed.Skipped; ran != c.ran || r.Observed.Bad() != c.bad {
				t.Errorf("ran %d bad %d, want %d and %d (%s)", ran, r.Observed.Bad(), c.ran, c.bad, r.Summary())
			}
			for _, conv := range c.conventions {
				if !slices.Contains(r.Conventions, conv) {
					t.Errorf("conventions %v lack %s", r.Conventions, conv)
				}
			}
			if c.failing != nil && !slices.Equal(r.Failing(), c.failing) {
				t.Errorf("failing %q, want %q", r.Failing(), c.failing)
			}
			if d.Outcome == workitems.OutcomeRetry && c.bad > 0 {
				// The retry's input carries the failures.
				for _, id := range r.Failing() {
					if !strings.Contains(d.Next.Input, id) {
						t.Errorf("retry input %q lacks failing test %s", d.Next.Input, id)
					}
				}
			}
		})
	}
}

// TestInvocationAndRerun: a failure in one invocation is a failure whatever the other runs of
// that invocation did; only a later rerun makes it flaky.
func TestInvocationAndRerun(t *testing.T) {
	t.Parallel()
	run := func(o TestOutcome, rerun int) TestRun { return TestRun{Outcome: o, Rerun: rerun} }
	cases := []struct {
		name  string
		runs  []TestRun
		final TestOutcome
		flaky bool
	}{
		{"-count=2, fail then pass", []TestRun{run(OutcomeFail, 0), run(OutcomePass, 0)}, OutcomeFail, false},
		{"-count=2, pass then fail", []TestRun{run(OutcomePass, 0), run(OutcomeFail, 0)}, OutcomeFail, false},
		{"fail, then pass on a rerun", []TestRun{run(OutcomeFail, 0), run(OutcomePass, 1)}, OutcomePass, true},
		{"fail, rerun fails", []TestRun{run(OutcomeFail, 0), run(OutcomeFail, 1)}, OutcomeFail, false},
		{"rerun with -count=2: one of its runs fails", []TestRun{run(OutcomeFail, 0), run(OutcomePass, 1), run(OutcomeError, 1)}, OutcomeError, false},
		{"pass only", []TestRun{run(OutcomePass, 0)}, OutcomePass, false},
		{"skip", []TestRun{run(OutcomeSkip, 0)}, OutcomeSkip, false},
		{"no runs", nil, OutcomeIncomplete, false},
	}
	for _, c := range cases {
		tc := &TestCase{ID: "x", Runs: c.runs}
		if got := tc.Final(); got != c.final {
			t.Errorf("%s: final %s, want %s", c.name, got, c.final)
		}
		if got := tc.Flaky(); got != c.flaky {
			t.Errorf("%s: flaky %v, want %v", c.name, got, c.flaky)
		}
	}
	// The real streams: go test -count=2 fails; gotestsum's --rerun-fails stream is flaky.
	count, err := ParseFile("testdata/gojson/count-fail.json", FormatAuto, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rerun, err := ParseFile("testdata/gojson/rerun.json", FormatAuto, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(count.FlakyTests()) != 0 || count.Green() {
		t.Errorf("go test -count=2 with a failure: flaky %d green %v, want a failure", len(count.FlakyTests()), count.Green())
	}
	if len(rerun.FlakyTests()) != 1 || !rerun.Green() {
		t.Errorf("gotestsum rerun: flaky %d green %v, want flaky and green", len(rerun.FlakyTests()), rerun.Green())
	}
}

// TestContradictionNeverCloses: declared totals no convention explains escalate when the report
// shows no failure and retry with the failures when it shows some; neither closes.
func TestContradictionNeverCloses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	green := filepath.Join(dir, "green.xml")
	failing := filepath.Join(dir, "failing.xml")
	write(t, green, `<testsuite name="s" tests="3" failures="0"><testcase classname="s" name="a"/></testsuite>`)
	write(t, failing, `<testsuite name="s" tests="3" failures="1"><testcase classname="s" name="a"><failure message="boom"/></testcase></testsuite>`)
	for _, c := range []struct {
		file, want string
	}{{green, "decision: escalate — contradicting evidence"}, {failing, "decision: retry — 1 failing tests (s.a)"}} {
		var out bytes.Buffer
		code, err := RunCLI(context.Background(), &out, []string{c.file}, CLIOptions{})
		if err != nil || code != 1 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: code %d err %v, output %q; want %q", filepath.Base(c.file), code, err, out.String(), c.want)
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIReplay: everything the policy uses can be given to `outerloop verify` as files, and
// --json returns the same decision as the text.
func TestCLIReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sha := strings.Repeat("ab", 20)
	ciGreen := filepath.Join(dir, "ci-green.json")
	ciRed := filepath.Join(dir, "ci-red.json")
	ciBad := filepath.Join(dir, "ci-bad.json")
	write(t, ciGreen, `{"repo":"acme/pay","sha":"`+sha+`","checks":[{"name":"test","state":"success"}]}`)
	write(t, ciRed, `{"repo":"acme/pay","sha":"`+sha+`","checks":[{"name":"test","state":"failed"}]}`)
	write(t, ciBad, `{"repo":"acme/pay","sha":"nope","checks":[]}`)
	secret := filepath.Join(dir, "secret.patch")
	write(t, secret, "diff --git a/conf.go b/conf.go\n--- a/conf.go\n+++ b/conf.go\n@@ -1 +1,2 @@\n package conf\n+const key = \"AKIAABCDEFGHIJKLMNOP\"\n")
	wide := filepath.Join(dir, "wide.patch")
	write(t, wide, "diff --git a/docs/x.md b/docs/x.md\n--- a/docs/x.md\n+++ b/docs/x.md\n@@ -1 +1 @@\n-a\n+b\n")
	scoped := &config.Template{Name: "scoped", MaxAttempts: 3, DoneCheck: config.DoneCheck{
		Diff: &config.DiffCheck{AllowedPaths: []string{"pay/**"}}, CI: &config.CICheck{Required: []string{"test"}}}}
	one, zero := 1, 0
	pass := "testdata/gojson/pass.json"
	cases := []struct {
		name  string
		files []string
		opt   CLIOptions
		code  int
		rule  workitems.RuleName
	}{
		{"green report, exit code 0", []string{pass}, CLIOptions{ExitCode: &zero}, 0, "all_green"},
		{"green-looking report from a run that exited 1", []string{pass}, CLIOptions{ExitCode: &one}, 1, "command_failed"},
		{"exit code alone, no report asked for", nil, CLIOptions{ExitCode: &zero}, 0, "checks_passed"},
		{"green CI", []string{pass}, CLIOptions{CIFile: ciGreen}, 0, "all_green"},
		{"failed CI", []string{pass}, CLIOptions{CIFile: ciRed}, 1, "ci_failed"},
		{"a required check missing from the CI file", []string{pass}, CLIOptions{CIFile: ciGreen,
			Template: &config.Template{Name: "t", DoneCheck: config.DoneCheck{CI: &config.CICheck{Required: []string{"lint"}}}}}, 1, "ci_missing"},
		{"a secret in the diff", []string{pass}, CLIOptions{DiffFile: secret}, 1, "diff_secret"},
		{"the template's allowed paths", []string{pass}, CLIOptions{DiffFile: wide, CIFile: ciGreen, Template: scoped}, 1, "diff_out_of_scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var text, js bytes.Buffer
			code, err := RunCLI(context.Background(), &text, c.files, c.opt)
			if err != nil || code != c.code {
				t.Fatalf("code %d err %v, want %d; output %s", code, err, c.code, text.String())
			}
			c.opt.JSON = true
			if code2, err := RunCLI(context.Background(), &js, c.files, c.opt); err != nil || code2 != code {
				t.Fatalf("--json: code %d err %v, want %d", code2, err, code)
			}
			var v CLIVerdict
			if err := json.Unmarshal(js.Bytes(), &v); err != nil {
				t.Fatalf("--json output: %v", err)
			}
			if v.Decision.Rule != c.rule {
				t.Errorf("rule %s (%q), want %s", v.Decision.Rule, v.Decision.Reasons, c.rule)
			}
			if !strings.Contains(text.String(), "decision: "+string(v.Decision.Outcome)) {
				t.Errorf("text and JSON disagree: %q vs %s", text.String(), v.Decision.Outcome)
			}
			if strings.Contains(js.String(), "AKIAABCDEFGHIJKLMNOP") {
				t.Error("--json output carries the secret")
			}
		})
	}
	t.Run("an invalid CI file is an error, not evidence", func(t *testing.T) {
		t.Parallel()
		code, err := RunCLI(context.Background(), &bytes.Buffer{}, []string{pass}, CLIOptions{CIFile: ciBad})
		if err == nil || code != 2 || !strings.Contains(err.Error(), "sha") {
			t.Errorf("code %d err %v, want 2 and an error naming the sha", code, err)
		}
	})
}

// TestConventionsListed: every convention the fixtures trigger is in Conventions() and POLICY.md.
func TestConventionsListed(t *testing.T) {
	t.Parallel()
	policy, err := os.ReadFile("POLICY.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range Conventions() {
		known[c.Name] = true
		if !strings.Contains(string(policy), "`"+c.Name+"`") {
			t.Errorf("POLICY.md lacks convention %s", c.Name)
		}
	}
	files, _ := filepath.Glob("testdata/*/*.*")
	seen := map[string]bool{}
	for _, f := range files {
		r, err := ParseFile(f, FormatAuto, Limits{})
		if err != nil {
			continue
		}
		for _, c := range r.Conventions {
			seen[c] = true
			if !known[c] {
				t.Errorf("%s applies %s, which Conventions() does not list", f, c)
			}
		}
	}
	for name := range known {
		if !seen[name] {
			t.Errorf("no fixture exercises convention %s", name)
		}
	}
}

// TestProveVerboseCutOrFailing: prove -v's output closes only with its Result line and a green
// run; a cut-off output, a FAIL no program explains and prove's own verdicts never close.
func TestProveVerboseCutOrFailing(t *testing.T) {
	t.Parallel()
	green := "t/a.t .. \n1..2\nok 1 - a\nok 2 - b\nok\nAll tests successful.\nFiles=1, Tests=2,  0 wallclock secs\nResult: PASS\n"
	for _, c := range []struct {
		name, out string
		rule      workitems.RuleName
		failing   []string
	}{
		{"green", green, "all_green", nil},
		{"CRLF", strings.ReplaceAll(green, "\n", "\r\n"), "all_green", nil},
		{"a program skipped whole comes first", "t/s.t .. skipped: no database\n" + green, "all_green", nil},
		{"prove --timer", strings.Replace(green, "ok 2 - b\nok\n", "ok 2 - b\nok     12 ms\n", 1), "all_green", nil},
		{"cut before its summary", "t/a.t .. \n1..2\nok 1 - a\nok 2 - b\nok\n", "", nil},
		{"a FAIL no program explains", strings.Replace(green, "Result: PASS", "Result: FAIL", 1), "tests_failed", []string{"(prove)"}},
		{"no subtests run", "t/a.t .. \n1..0\nNo subtests run\nFiles=1, Tests=0\nResult: FAIL\n", "tests_failed", []string{"t/a.t.(exit)"}},
		{"a plan not met", "t/a.t .. \n1..3\nok 1 - a\nFailed 2/3 subtests\nFiles=1, Tests=1\nResult: FAIL\n", "", nil},
	} {
		r, err := ParseReport(strings.NewReader(c.out), c.name, FormatAuto, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, ReportExpected: true,
			Template: &config.Template{MaxAttempts: 3}, Reports: []*Report{r}}
		d := decide(f)
		if r.Flavor != flavorProve {
			t.Errorf("%s: flavour %q, want %q", c.name, r.Flavor, flavorProve)
		}
		if c.rule != "" && d.Rule != c.rule || c.rule == "" && d.Outcome == workitems.OutcomeClose {
			t.Errorf("%s: rule %s (%q), want %q (never a close); %s, warnings %q", c.name, d.Rule, d.Reasons, c.rule, r.Summary(), r.Warnings)
		}
		if c.failing != nil && !slices.Equal(r.Failing(), c.failing) {
			t.Errorf("%s: failing %q, want %q", c.name, r.Failing(), c.failing)
		}
	}
}

// TestMissingCountAndConfigFunctions: the rules behind issue 43's JUnit cases, on reports no
// fixture has. A count attribute left out is unknown (never zero) and comes from the suites only
// when every one declares it; a declared count still contradicts a listing it does not match.
// Cases named as Common Test's configuration functions are dropped only when the declared count
// leaves out exactly them.
func TestMissingCountAndConfigFunctions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, xml string
		rule      workitems.RuleName
		ran       int
	}{
		{"disabled= alone is no skipped count",
			`<testsuites tests="2" disabled="0"><testsuite name="s"><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite></testsuites>`,
			"all_green", 1},
		{"a suite's skipped= fills the root's",
			`<testsuites tests="2" failures="0"><testsuite name="s" tests="2" skipped="1"><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite></testsuites>`,
			"all_green", 1},
		{"a suite's skipped= that contradicts the listing",
			`<testsuites tests="2" failures="0"><testsuite name="s" tests="2" skipped="0"><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite></testsuites>`,
			"counts_disagree", 1},
		{"one suite without skipped=: the root's stays unknown",
			`<testsuites tests="3"><testsuite name="s" tests="2" skipped="0"><testcase name="a"/><testcase name="b"/></testsuite><testsuite name="t" tests="1"><testcase name="c"><skipped/></testcase></testsuite></testsuites>`,
			"all_green", 2},
		{"config functions counted in tests= stay tests",
			`<testsuite name="s" tests="3" failures="1"><testcase name="init_per_suite"><failure message="x"/></testcase><testcase name="a"/><testcase name="end_per_suite"/></testsuite>`,
			"tests_failed", 3},
		{"config functions outside tests=: a failing one is an error",
			`<testsuite name="s" tests="1" failures="0" skipped="1"><testcase name="init_per_suite"><failure message="x"/></testcase><testcase name="a"><skipped/></testcase><testcase name="end_per_suite"><skipped/></testcase></testsuite>`,
			"tests_failed", 1},
		{"config functions outside tests=, green",
			`<testsuite name="s" tests="1" failures="0" skipped="0"><testcase name="init_per_suite"/><testcase name="a"/><testcase group="g" name="init_per_group"/><testcase group="g" name="end_per_group"/><testcase name="end_per_suite"/></testsuite>`,
			"all_green", 1},
	} {
		r, err := ParseReport(strings.NewReader(c.xml), c.name, FormatAuto, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, ReportExpected: true,
			Template: &config.Template{MaxAttempts: 3}, Reports: []*Report{r}}
		d := decide(f)
		if d.Rule != c.rule || r.Observed.Total-r.Observed.Skipped != c.ran {
			t.Errorf("%s: rule %s (%q), ran %d; want %s and %d; %s", c.name, d.Rule, d.Reasons, r.Observed.Total-r.Observed.Skipped, c.rule, c.ran, r.Summary())
		}
	}
}
