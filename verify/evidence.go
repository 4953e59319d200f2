package verify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"outerloop/lib/shorten"
	"outerloop/workitems"
)

// TestOutcome is the result of one run of one test.
type TestOutcome string

// The test outcomes. Error is a failure outside the test's assertions (setup, teardown, a
// collection error); Incomplete is a test that started and never reported an end.
const (
	OutcomePass       TestOutcome = "pass"
	OutcomeFail       TestOutcome = "fail"
	OutcomeError      TestOutcome = "error"
	OutcomeSkip       TestOutcome = "skip"
	OutcomeTimeout    TestOutcome = "timeout"
	OutcomeIncomplete TestOutcome = "incomplete"
)

// Bad reports whether the outcome is a failure of some kind.
func (o TestOutcome) Bad() bool {
	return o == OutcomeFail || o == OutcomeError || o == OutcomeTimeout || o == OutcomeIncomplete
}

// TestRun is one run of a test (a report may hold several: reruns, flaky retries).
type TestRun struct {
	Outcome TestOutcome   `json:"outcome"`
	Elapsed time.Duration `json:"elapsed,omitempty"`
	Message string        `json:"message,omitempty"` // first failure line or skip reason
	Output  string        `json:"output,omitempty"`  // bounded tail of the test's output
	// Rerun is the invocation the run belongs to: 0 for the test command itself, n for its n-th
	// rerun (gotestsum --rerun-fails, Surefire's reruns). Several runs in one invocation
	// (go test -count=N, a pytest call failure plus its teardown error) share it: a failure
	// among them is a failure, whatever the others did.
	Rerun int `json:"rerun,omitempty"`
}

// TestCase is one test and its runs, in report order.
type TestCase struct {
	ID    string    `json:"id"`    // stable identity: "<package or suite>.<name>" (gojson: "pkg TestX/sub")
	Suite string    `json:"suite"` // package, class or file
	Name  string    `json:"name"`
	Runs  []TestRun `json:"runs"`
}

// Final is the outcome of the last invocation: its first bad run if any (a test that failed in
// one of the -count=N runs failed), else its last run.
func (t *TestCase) Final() TestOutcome {
	if len(t.Runs) == 0 {
		return OutcomeIncomplete
	}
	last := t.Runs[len(t.Runs)-1]
	for _, r := range t.Runs {
		if r.Rerun == last.Rerun && r.Outcome.Bad() {
			return r.Outcome
		}
	}
	return last.Outcome
}

// Flaky reports whether the test failed in an invocation and passed on a later rerun: only a
// rerun makes a failure flaky, never another run in the same invocation.
func (t *TestCase) Flaky() bool {
	if t.Final() != OutcomePass {
		return false
	}
	last := t.Runs[len(t.Runs)-1].Rerun
	for _, r := range t.Runs {
		if r.Rerun < last && r.Outcome.Bad() {
			return true
		}
	}
	return false
}

// FirstBad returns the first failing run, or nil.
func (t *TestCase) FirstBad() *TestRun {
	for i := range t.Runs {
		if t.Runs[i].Outcome.Bad() {
			return &t.Runs[i]
		}
	}
	return nil
}

// Counts tallies tests by final outcome. Declared counts of a report are -1 where the report
// declares nothing (go test -json declares no totals).
type Counts struct {
	Total      int `json:"total"`
	Passed     int `json:"passed"`
	Failed     int `json:"failed"`
	Errored    int `json:"errored"`
	Skipped    int `json:"skipped"`
	Timeout    int `json:"timeout,omitempty"`
	Incomplete int `json:"incomplete,omitempty"`
}

// unknownCounts is the declared count of a report that declares none.
func unknownCounts() Counts {
	return Counts{Total: -1, Passed: -1, Failed: -1, Errored: -1, Skipped: -1}
}

// Report is the evidence one test report gives.
type Report struct {
	Source string                 `json:"source"`           // file or command it came from
	Format workitems.ReportFormat `json:"format"`           // never auto
	Flavor string                 `json:"flavor,omitempty"` // surefire, pytest, jest, gotestsum, tap13, tap14 ...
	// Conventions names the counting rules of the flavour that were applied (Conventions()).
	Conventions []string    `json:"conventions,omitempty"`
	Complete    bool        `json:"complete"` // every started test and package reported an end
	BuildFailed bool        `json:"build_failed"`
	BuildErrors []string    `json:"build_errors,omitempty"` // first lines of build output
	Declared    Counts      `json:"declared"`               // what the report says about itself (-1: not said)
	Observed    Counts      `json:"observed"`               // tests by final outcome (each test once)
	Listed      Counts      `json:"listed"`                 // entries as the tool counts them (JUnit: testcase elements)
	Tests       []*TestCase `json:"tests,omitempty"`
	Warnings    []string    `json:"warnings,omitempty"`
	FirstError  string      `json:"first_error,omitempty"`
	Bailed      bool        `json:"bailed,omitempty"`  // TAP "Bail out!"
	Dropped     int         `json:"dropped,omitempty"` // test cases counted but not kept (MaxTests)
	// ExitStatusNeeded says why this reporter's report cannot show a failure outside its tests
	// (rspec, cargo, TAP): without the test command's exit status such a report never closes.
	ExitStatusNeeded string `json:"exit_status_needed,omitempty"`

	uncompared map[string]bool // declared counts a convention says not to compare ("errors")
}

// Limits bound what a parser keeps in memory.
type Limits struct {
	OutputTail int // bytes of output kept per test (default 4 KiB)
	MaxTests   int // test cases kept with details (default 100 000); more are counted only
	MaxLine    int // longest line kept (default 1 MiB); longer lines are cut and warned about
	MaxWarn    int // warnings kept (default 50)
}

func (l Limits) withDefaults() Limits {
	if l.OutputTail <= 0 {
		l.OutputTail = 4 << 10
	}
	if l.MaxTests <= 0 {
		l.MaxTests = 100_000
	}
	if l.MaxLine <= 0 {
		l.MaxLine = 1 << 20
	}
	if l.MaxWarn <= 0 {
		l.MaxWarn = 50
	}
	return l
}

// convention records that a reporter convention was applied (once per name).
func (r *Report) convention(name string) {
	if !slices.Contains(r.Conventions, name) {
		r.Conventions = append(r.Conventions, name)
	}
}

// warn adds a warning unless the list is full.
func (r *Report) warn(max int, format string, args ...any) {
	if len(r.Warnings) < max {
		r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
	} else if len(r.Warnings) == max {
		r.Warnings = append(r.Warnings, "more warnings dropped")
	}
}

// tally recomputes Observed from the kept tests plus those counted but dropped.
func (r *Report) tally(dropped Counts) {
	c := dropped
	for _, t := range r.Tests {
		c.add(t.Final())
	}
	r.Observed = c
	r.Listed = c
}

func (c *Counts) add(o TestOutcome) {
	c.Total++
	switch o {
	case OutcomePass:
		c.Passed++
	case OutcomeFail:
		c.Failed++
	case OutcomeError:
		c.Errored++
	case OutcomeSkip:
		c.Skipped++
	case OutcomeTimeout:
		c.Timeout++
	case OutcomeIncomplete:
		c.Incomplete++
	}
}

// Bad is the number of tests whose final outcome is a failure.
func (c Counts) Bad() int { return c.Failed + c.Errored + c.Timeout + c.Incomplete }

// Failing returns the ids of tests whose final outcome is bad, sorted.
func (r *Report) Failing() []string {
	var out []string
	for _, t := range r.Tests {
		if t.Final().Bad() {
			out = append(out, t.ID)
		}
	}
	slices.Sort(out)
	return out
}

// FlakyTests returns the tests that failed and later passed.
func (r *Report) FlakyTests() []*TestCase {
	var out []*TestCase
	for _, t := range r.Tests {
		if t.Flaky() {
			out = append(out, t)
		}
	}
	return out
}

// CountsAgree reports whether the declared counts, where declared, match what was observed.
func (r *Report) CountsAgree() (bool, string) {
	d, o := r.Declared, r.Listed
	var diffs []string
	check := func(name string, dv, ov int) {
		if dv >= 0 && dv != ov {
			diffs = append(diffs, fmt.Sprintf("%s declared %d, found %d", name, dv, ov))
		}
	}
	// Tools differ on whether a rerun is another test: either count of tests agrees.
	if d.Total >= 0 && !r.uncompared["tests"] && d.Total != o.Total && d.Total != r.Observed.Total {
		diffs = append(diffs, fmt.Sprintf("tests declared %d, found %d", d.Total, o.Total))
	}
	for _, c := range []struct {
		name   string
		dv, ov int
	}{{"failures", d.Failed, o.Failed}, {"errors", d.Errored, o.Errored}, {"skipped", d.Skipped, o.Skipped}} {
		if !r.uncompared[c.name] {
			check(c.name, c.dv, c.ov)
		}
	}
	return len(diffs) == 0, strings.Join(diffs, "; ")
}

// Green reports whether the report alone shows success: complete, no build failure, more than
// zero tests, nothing bad, counts agree.
func (r *Report) Green() bool {
	ok, _ := r.CountsAgree()
	return ok && r.Complete && !r.BuildFailed && !r.Bailed && r.Observed.Total > 0 &&
		r.Observed.Bad() == 0 && r.Observed.Total > r.Observed.Skipped
}

// Summary is a one-line description of the report.
func (r *Report) Summary() string {
	o := r.Observed
	s := fmt.Sprintf("%s %s: %d tests, %d passed, %d failed, %d errors, %d skipped", r.Format, r.Source,
		o.Total, o.Passed, o.Failed, o.Errored, o.Skipped)
	if o.Timeout > 0 {
		s += fmt.Sprintf(", %d timed out", o.Timeout)
	}
	if o.Incomplete > 0 {
		s += fmt.Sprintf(", %d incomplete", o.Incomplete)
	}
	if r.BuildFailed {
		s += ", build failed"
	}
	if !r.Complete {
		s += ", incomplete report"
	}
	if n := len(r.FlakyTests()); n > 0 {
		s += fmt.Sprintf(", %d flaky", n)
	}
	return s
}

// tail keeps the last n bytes written to it, in amortised O(1) per byte.
type tail struct {
	buf []byte
	n   int
	cut bool
}

func (t *tail) write(p []byte) {
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		t.cut = true
		return
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
		t.cut = true
	}
}

func (t *tail) String() string {
	b := t.buf
	if len(b) > t.n {
		b = b[len(b)-t.n:]
	}
	return string(b)
}

// firstLine returns the first non-empty line of s, trimmed and bounded.
func firstLine(s string) string { return shorten.Clip(shorten.FirstLine(s), 300) }
