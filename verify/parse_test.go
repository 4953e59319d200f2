package verify

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"outerloop/workitems"
)

// want is what a fixture must parse to. Counts are checked only where set (>= 0 means checked
// via the field list); failing ids are compared exactly.
type want struct {
	format      workitems.ReportFormat
	complete    bool
	buildFailed bool
	total       int
	passed      int
	bad         int
	skipped     int
	failing     []string
	firstError  string // substring
	flaky       int
	countsAgree bool
	warning     string // substring of some warning
	flavor      string
}

func TestParseFixtures(t *testing.T) {
	t.Parallel()
	cases := map[string]want{
		// go test -json, recorded from the packages in testdata/gopkgs (gen.sh)
		"gojson/pass.json": {format: "gojson", complete: true, total: 5, passed: 4, skipped: 1, countsAgree: true},
		"gojson/fail.json": {format: "gojson", complete: true, total: 5, passed: 2, bad: 3, countsAgree: true,
			failing:    []string{"fixtures/fail.TestTable", "fixtures/fail.TestTable/two", "fixtures/fail.TestWrongSum"},
			firstError: "TestWrongSum: fail_test.go:10: sum = 3, want 4"},
		"gojson/panic.json": {format: "gojson", complete: true, total: 3, passed: 1, bad: 2, countsAgree: true,
			failing:    []string{"fixtures/panic.TestBoom", "fixtures/panic.TestParallelWaiting"},
			firstError: "TestBoom: panic: assignment to entry in nil map"},
		"gojson/timeout.json": {format: "gojson", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true,
			failing: []string{"fixtures/timeout.TestHangs"}, firstError: "panic: test timed out after 1s"},
		"gojson/buildfail.json": {format: "gojson", complete: true, buildFailed: true, countsAgree: true,
			firstError: `cannot use "forty-two"`},
		"gojson/depbuild.json": {format: "gojson", complete: true, buildFailed: true, countsAgree: true,
			firstError: "undefined: undefinedName"},
		"gojson/testmain.json": {format: "gojson", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true,
			failing: []string{"fixtures/testmain.(package)"}, firstError: "leak check"},
		"gojson/notests.json":   {format: "gojson", complete: true, countsAgree: true},
		"gojson/bigoutput.json": {format: "gojson", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true, failing: []string{"fixtures/bigoutput.TestLongLine"}, firstError: "expected short output"},
		"gojson/parallel.json": {format: "gojson", complete: true, total: 6, passed: 4, bad: 2, countsAgree: true,
			failing: []string{"fixtures/parallel.TestGroup", "fixtures/parallel.TestGroup/b"}, firstError: "b failed"},
		"gojson/multi.json":  {format: "gojson", complete: true, total: 10, passed: 6, bad: 3, skipped: 1, countsAgree: true, failing: []string{"fixtures/fail.TestTable", "fixtures/fail.TestTable/two", "fixtures/fail.TestWrongSum"}, firstError: "sum = 3"},
		"gojson/mixed.json":  {format: "gojson", complete: true, buildFailed: true, total: 5, passed: 4, skipped: 1, countsAgree: true, firstError: "forty-two"},
		"gojson/rerun.json":  {format: "gojson", complete: true, total: 2, passed: 2, flaky: 1, countsAgree: true},
		"gojson/cutoff.json": {format: "gojson", complete: false, total: 2, passed: 1, bad: 1, countsAgree: true, failing: []string{"fixtures/fail.TestWrongSum"}, warning: "last line cut off"},
		"gojson/nonjson-mixed.json": {format: "gojson", complete: true, buildFailed: true, total: 5, passed: 4, skipped: 1,
			countsAgree: true, firstError: "syntax error", warning: "not a go test -json event"},

		// JUnit XML
		"junit/gotestsum-fail.xml": {format: "junit", flavor: "gotestsum", complete: true, total: 13, passed: 7, bad: 5, skipped: 1, countsAgree: true,
			failing: []string{"fixtures/fail.TestTable", "fixtures/fail.TestTable/two", "fixtures/fail.TestWrongSum",
				"fixtures/panic.TestBoom", "fixtures/panic.TestParallelWaiting"}, firstError: "sum = 3, want 4"},
		// JUnit cannot tell gotestsum's rerun from another run of `go test -count=N`: a failure
		// stays a failure (gotestsum's --jsonfile, gojson/rerun.json, shows the rerun).
		"junit/gotestsum-rerun.xml": {format: "junit", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true,
			failing: []string{"fixtures/flaky.TestSometimes"}},
		"junit/pytest-xunit2.xml": {format: "junit", flavor: "pytest", complete: true, total: 7, passed: 1, bad: 4, skipped: 2, countsAgree: true,
			failing: []string{"test_sample.test_fails", "test_sample.test_fails_and_teardown_errors",
				"test_sample.test_prints_control_chars", "test_sample.test_teardown_only_errors"},
			firstError: "lists differ"},
		"junit/pytest-xunit1.xml":        {format: "junit", complete: true, total: 7, passed: 1, bad: 4, skipped: 2, countsAgree: true, firstError: "lists differ"},
		"junit/pytest-collect-error.xml": {format: "junit", complete: true, total: 1, bad: 1, countsAgree: true, failing: []string{"pytest.test_collect_error"}, firstError: "collection failure"},
		"junit/jest-junit.xml": {format: "junit", flavor: "jest-junit", complete: true, total: 4, passed: 2, bad: 1, skipped: 1, countsAgree: true,
			failing: []string{"sum adds badly"}, firstError: "expect(received).toBe(expected)"},
		"junit/surefire-flaky.xml": {format: "junit", flavor: "surefire", complete: true, total: 3, passed: 2, bad: 1, flaky: 1, countsAgree: true,
			failing: []string{"com.acme.PaymentTest.chargesCard"}, firstError: "card declined"},
		"junit/surefire-wrong-totals.xml": {format: "junit", complete: true, total: 2, passed: 1, bad: 1, countsAgree: false},
		"junit/nested.xml": {format: "junit", complete: true, total: 3, passed: 2, bad: 1, countsAgree: true,
			failing: []string{"unit.b"}, firstError: "b broke"},
		"junit/cdata-control.xml": {format: "junit", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true,
			failing: []string{"c.cdata"}, firstError: "bad"},
		"junit/latin1.xml":       {format: "junit", complete: true, total: 1, bad: 1, countsAgree: true, failing: []string{"café.crème"}, firstError: "prêt à servir"},
		"junit/bom.xml":          {format: "junit", complete: true, total: 1, passed: 1, countsAgree: true},
		"junit/junit-named.json": {format: "junit", complete: true, total: 1, passed: 1, countsAgree: true},
		"junit/truncated.xml":    {format: "junit", complete: false, total: 1, passed: 1, countsAgree: false, warning: "XML error"},

		// TAP
		"tap/node.tap": {format: "tap", flavor: "tap13", complete: true, total: 7, passed: 2, bad: 3, skipped: 2, countsAgree: true,
			failing: []string{"compares objects", "math", "math > divides"}, firstError: "strictly deep-equal"},
		"tap/plan-last.tap":        {format: "tap", complete: true, total: 4, passed: 2, skipped: 2, countsAgree: true},
		"tap/no-plan.tap":          {format: "tap", complete: false, total: 2, passed: 2, countsAgree: true, warning: "no plan"},
		"tap/plan-mismatch.tap":    {format: "tap", complete: false, total: 2, passed: 2, countsAgree: false, warning: "plan 1..5 but 2 tests"},
		"tap/bail.tap":             {format: "tap", complete: false, total: 1, passed: 1, countsAgree: false, firstError: "Bail out! database went away"},
		"tap/json-diagnostics.tap": {format: "tap", complete: true, total: 2, passed: 1, bad: 1, countsAgree: true, failing: []string{"compares"}, firstError: `want {\"a\":1}`},
		"tap/subtests.tap": {format: "tap", complete: true, total: 4, passed: 2, bad: 2, countsAgree: true,
			failing: []string{"parser", "parser > reads strings"}, firstError: "unterminated string"},
	}
	for file, w := range cases {
		t.Run(file+" parses to its known evidence", func(t *testing.T) {
			t.Parallel()
			r, err := ParseFile("testdata/"+file, FormatAuto, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != w.format || r.Complete != w.complete || r.BuildFailed != w.buildFailed {
				t.Errorf("format/complete/build = %s/%v/%v, want %s/%v/%v (warnings %q)", r.Format, r.Complete, r.BuildFailed,
					w.format, w.complete, w.buildFailed, r.Warnings)
			}
			o := r.Observed
			if o.Total != w.total || o.Passed != w.passed || o.Bad() != w.bad || o.Skipped != w.skipped {
				t.Errorf("observed %+v, want total %d passed %d bad %d skipped %d", o, w.total, w.passed, w.bad, w.skipped)
			}
			if w.failing != nil && !slices.Equal(r.Failing(), w.failing) {
				t.Errorf("failing %q, want %q", r.Failing(), w.failing)
			}
			if w.failing == nil && w.bad == 0 && len(r.Failing()) > 0 {
				t.Errorf("failing %q, want none", r.Failing())
			}
			if !strings.Contains(r.FirstError, w.firstError) {
				t.Errorf("first error %q, want it to contain %q", r.FirstError, w.firstError)
			}
			if n := len(r.FlakyTests()); n != w.flaky {
				t.Errorf("%d flaky, want %d", n, w.flaky)
			}
			if ok, why := r.CountsAgree(); ok != w.countsAgree {
				t.Errorf("counts agree = %v (%s), want %v; declared %+v listed %+v", ok, why, w.countsAgree, r.Declared, r.Listed)
			}
			if w.flavor != "" && r.Flavor != w.flavor {
				t.Errorf("flavor %q, want %q", r.Flavor, w.flavor)
			}
			if w.warning != "" && !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, w.warning) }) {
				t.Errorf("warnings %q, want one containing %q", r.Warnings, w.warning)
			}
			wantGreen := w.complete && !w.buildFailed && w.bad == 0 && w.total > w.skipped && w.countsAgree
			if r.Green() != wantGreen {
				t.Errorf("green = %v, want %v", r.Green(), wantGreen)
			}
		})
	}
}

func TestDetectFormat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, content string
		want          workitems.ReportFormat
	}{
		{"a TAP stream whose diagnostics look like go test -json stays TAP", "ok 1 - x\n  ---\n  {\"Action\":\"run\",\"Test\":\"T\"}\n  ...\n1..1\n", FormatTAP},
		{"a TAP stream starting with its plan is TAP", "1..2\nok 1\nok 2\n", FormatTAP},
		{"go test -json after go: downloading lines is gojson", "go: downloading x v1\n{\"Action\":\"start\",\"Package\":\"p\"}\n", FormatGoJSON},
		{"JUnit after a BOM is junit", "\xef\xbb\xbf<?xml version=\"1.0\"?><testsuite tests=\"0\"/>", FormatJUnit},
		{"an XML file that is not JUnit is unknown", "<?xml version=\"1.0\"?><project/>", ""},
		{"JSON that is not test2json is unknown", "{\"name\":\"x\"}\n", ""},
		{"plain text is unknown", "hello\nworld\n", ""},
		{"plain output with an ok line further down is not TAP", "building\nok\n", ""},
		{"a TAP stream after comments is TAP", "# run by prove\nok 1 - a\n1..1\n", FormatTAP},
		{"empty input is unknown", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := detectFormat([]byte(c.content), "x.json"); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestParseReportUnknownFormat(t *testing.T) {
	t.Parallel()
	_, err := ParseReport(strings.NewReader("just some text\n"), "x.txt", FormatAuto, Limits{})
	if err == nil || !strings.Contains(err.Error(), "x.txt") {
		t.Fatalf("err = %v", err)
	}
}

// hugeReader yields prefix, then n bytes of filler, then suffix, without holding them.
func hugeReader(prefix string, n int64, fill byte, suffix string) io.Reader {
	line := bytes.Repeat([]byte{fill}, 99)
	line = append(line, '\n')
	var body io.Reader = &repeatReader{chunk: line, left: n}
	return io.MultiReader(strings.NewReader(prefix), body, strings.NewReader(suffix))
}

type repeatReader struct {
	chunk []byte
	left  int64
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:min(len(p), n+int(r.left))], r.chunk[r.off:])
		r.off = (r.off + c) % len(r.chunk)
		n += c
		r.left -= int64(c)
	}
	return n, nil
}

func TestJUnitHugeSystemOutIsCutToATail(t *testing.T) {
	t.Parallel()
	in := hugeReader(`<testsuite tests="1" failures="1"><testcase classname="c" name="noisy"><failure message="boom"/><system-out>`,
		50<<20, 'x', "the last line\n</system-out></testcase></testsuite>")
	r, err := ParseJUnit(in, "big.xml", Limits{OutputTail: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || r.Observed.Failed != 1 {
		t.Fatalf("report %+v warnings %q", r.Observed, r.Warnings)
	}
	out := r.Tests[0].Runs[0].Output
	if len(out) > 1024 || !strings.Contains(out, "the last line") {
		t.Fatalf("output tail has %d bytes, ends %q", len(out), out[max(0, len(out)-40):])
	}
	if !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, "cut") }) {
		t.Fatalf("no warning about the cut: %q", r.Warnings)
	}
}

func TestGoJSONHugeLineIsCut(t *testing.T) {
	t.Parallel()
	in := hugeReader(`{"Action":"run","Package":"p","Test":"T"}`+"\n"+`{"Action":"output","Package":"p","Test":"T","Output":"`,
		8<<20, 'y', "\"}\n{\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"T\"}\n{\"Action\":\"fail\",\"Package\":\"p\"}\n")
	r, err := ParseGoJSON(in, "big.json", Limits{MaxLine: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Observed.Failed != 1 || !r.Complete {
		t.Fatalf("observed %+v complete %v warnings %q", r.Observed, r.Complete, r.Warnings)
	}
}

func TestLimitsDropTestsButKeepCounting(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("1..5\n")
	for i := 0; i < 5; i++ {
		b.WriteString("ok - t" + string(rune('a'+i)) + "\n")
	}
	r, err := ParseTAP(strings.NewReader(b.String()), "many.tap", Limits{MaxTests: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tests) != 2 || r.Dropped != 3 || r.Observed.Total != 5 || r.Observed.Passed != 5 {
		t.Fatalf("tests %d dropped %d observed %+v", len(r.Tests), r.Dropped, r.Observed)
	}
}

func TestFixturesExist(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"testdata/gojson", "testdata/junit", "testdata/tap"} {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) == 0 {
			t.Fatalf("%s: %v (%d files)", dir, err, len(ents))
		}
	}
}

func TestJUnitCleansWhatToolsGetWrong(t *testing.T) {
	t.Parallel()
	r, err := ParseFile("testdata/junit/cdata-control.xml", FormatJUnit, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cdata := r.Tests[0].Runs[0]
	if cdata.Message != "bad ?[1m ? attr" {
		t.Errorf("attribute message %q", cdata.Message)
	}
	if !strings.Contains(cdata.Output, "x[0]]> y and ?[31mred?[0m and a NUL ?") {
		t.Errorf("CDATA text %q", cdata.Output)
	}
	// A split "]]>" across reads and a comment must not confuse the cleaner either.
	in := "<testsuite tests=\"1\"><!-- a comment --><testcase classname=\"c\" name=\"n\"><failure><![CDATA[" +
		strings.Repeat("z", 70000) + "]]]]><![CDATA[>end]]></failure></testcase></testsuite>"
	r, err = ParseJUnit(iotestHalfReader(in), "split.xml", Limits{OutputTail: 64})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || r.Observed.Failed != 1 || len(r.Tests) != 1 || !strings.HasSuffix(r.Tests[0].Runs[0].Output, "]]>end") {
		t.Fatalf("complete %v observed %+v warnings %q tests %+v", r.Complete, r.Observed, r.Warnings, r.Tests)
	}
}

// iotestHalfReader returns s one byte per read, to split every construct.
func iotestHalfReader(s string) io.Reader {
	return iotest.HalfReader(iotest.OneByteReader(strings.NewReader(s)))
}

func TestGoLineShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line          string
		loc, compiler bool
	}{
		{"x_test.go:12: got 1", true, true},
		{"pkg/x.go:3:5: undefined: y", false, true},
		{"x.go: no line", false, false},
		{"a b.go:1: spaced", false, false},
		{"x.go:12:", false, false},
		{strings.Repeat("y", 100000), false, false},
	}
	for _, c := range cases {
		if got := isGoLoc([]byte(c.line)); got != c.loc {
			t.Errorf("isGoLoc(%.30q) = %v", c.line, got)
		}
		if got := isCompileErr([]byte(c.line)); got != c.compiler {
			t.Errorf("isCompileErr(%.30q) = %v", c.line, got)
		}
	}
}

func TestReadErrorsAreErrorsNotReports(t *testing.T) {
	t.Parallel()
	broken := func() io.Reader {
		return io.MultiReader(strings.NewReader("<testsuite><testcase name=\"a\"/>\nok 1\n"), iotest.ErrReader(errDisk))
	}
	for name, parse := range map[string]func(io.Reader, string, Limits) (*Report, error){
		"gojson": ParseGoJSON, "junit": ParseJUnit, "tap": ParseTAP,
	} {
		t.Run(name+" returns the reader's error", func(t *testing.T) {
			t.Parallel()
			if _, err := parse(broken(), "x", Limits{}); !errors.Is(err, errDisk) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

var errDisk = errors.New("disk on fire")
