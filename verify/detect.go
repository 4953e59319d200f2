package verify

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrUnknownFormat means a report's content is none of the formats we read.
var ErrUnknownFormat = errors.New("not a recognised test report")

const sniffBytes = 64 << 10

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// consoleHints recognise a runner's console output (never a report: its format is for people and
// changes between versions) by lines only that runner prints, and name the option that writes a
// report instead. The first match wins.
var consoleHints = []struct {
	tool, option string
	line         *regexp.Regexp
}{
	{"prove", "`prove -v` (each program's TAP and prove's summary are read), `prove --formatter TAP::Formatter::JUnit` (JUnit), or the test programs' own TAP with stderr merged (`perl t/x.t 2>&1`; `prove --merge --archive out.tgz` with TAP::Harness::Archive)",
		regexp.MustCompile(`(?m)^(Files=\d+, Tests=\d+|Result: (PASS|FAIL|NOTESTS)$|All tests successful\.$|\S+\.t \.\.+ ?(ok|skipped:.*)?\r?$)`)},
	{"cargo test", "`cargo test -- -Z unstable-options --format junit > report.xml` (nightly libtest; on stable, `RUSTC_BOOTSTRAP=1`)",
		regexp.MustCompile(`(?m)^(running \d+ tests?\r?$|test result: (ok|FAILED)\. \d+ passed)`)},
	{"rspec", "`rspec --format RspecJunitFormatter --out rspec.xml` (gem rspec_junit_formatter)",
		regexp.MustCompile(`(?m)^\d+ examples?, \d+ failures?`)},
	{"PHPUnit", "`phpunit --log-junit junit.xml`",
		regexp.MustCompile(`(?m)^PHPUnit \d+\.\d+[.\d]* by Sebastian Bergmann`)},
	{"googletest", "`--gtest_output=xml:report.xml` (or `GTEST_OUTPUT=xml:report.xml`)",
		regexp.MustCompile(`(?m)^\[==========\] (Running \d+ tests?|\d+ tests? from)`)},
	{"Catch2", "`--reporter junit --out report.xml`",
		regexp.MustCompile(`(?m)(is a Catch v?\d+\.\d+\.\d+ host application\.|^All tests passed \(\d+ assertions? in \d+ test cases?\)|^test cases: +\d+ \|)`)},
	{"bats", "`bats --formatter junit` (or `--report-formatter junit --output DIR`), or `bats --tap`",
		regexp.MustCompile(`(?m)^\d+ tests?, \d+ failures?(, \d+ skipped)?\r?$`)},
	{"go test", "`go test -json` (or gotestsum's `--junitfile`)",
		regexp.MustCompile(`(?m)^(--- (PASS|FAIL|SKIP): \S+ \(|(ok|FAIL)\s+\S+\s+[\d.]+s\r?$)`)},
	{"pytest", "`pytest --junitxml=report.xml`",
		regexp.MustCompile(`(?m)^=+ (test session starts|.*\b(passed|failed)\b.* in [\d.]+s.*) =+\r?$`)},
}

// noReportHints recognise the output of a run that ended before its reporter wrote a report
// (a build that failed, a program that died outside its tests), so the error says why there is
// no report rather than only that there is none.
var noReportHints = []struct {
	why  string
	line *regexp.Regexp
}{
	{"cargo could not compile the crate, so no test ran", regexp.MustCompile(`(?m)^error: could not compile `)},
	{"the test program ended on an uncaught C++ exception (std::terminate) outside its tests, before any report was written",
		regexp.MustCompile(`(?m)^terminate called after throwing an instance of `)},
	{"an XML declaration and nothing else: the reporter opened its file and never wrote the report (Catch2 writes its JUnit when the run ends; an error outside the tests stopped it)",
		regexp.MustCompile(`\A\s*<\?xml[^>]*\?>\s*\z`)},
}

// noReport says why head is the output of a run that wrote no report, or "".
func noReport(head []byte) string {
	for _, h := range noReportHints {
		if h.line.Match(head) {
			return h.why
		}
	}
	return ""
}

// consoleOutput names the runner whose console output head is, and the reporter option to use.
func consoleOutput(head []byte) (tool, option string) {
	for _, h := range consoleHints {
		if h.line.Match(head) {
			return h.tool, h.option
		}
	}
	return "", ""
}

// unknownFormat is the error for a head no format claims: what it is instead when that can be
// told, else what auto expected.
func unknownFormat(source string, head []byte, expected string) error {
	if why := noReport(head); why != "" {
		return fmt.Errorf("verify: %s: %w: %s", source, ErrUnknownFormat, why)
	}
	if tool, option := consoleOutput(head); tool != "" {
		return fmt.Errorf("verify: %s: %w: this is %s's console output, not a report; write one with %s", source, ErrUnknownFormat, tool, option)
	}
	if expected == "" {
		return fmt.Errorf("verify: %s: %w", source, ErrUnknownFormat)
	}
	return fmt.Errorf("verify: %s: %w (expected %s)", source, ErrUnknownFormat, expected)
}
