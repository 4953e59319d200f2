package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"outerloop/workitems"
)

// The report formats (workitems.ReportFormat owns them: the config accepts exactly these).
const (
	FormatAuto     = workitems.FormatAuto
	FormatGoJSON   = workitems.FormatGoJSON
	FormatJUnit    = workitems.FormatJUnit
	FormatTAP      = workitems.FormatTAP
	FormatJestJSON = workitems.FormatJestJSON
)

// ErrUnknownFormat means a report's content is none of the formats we read.
var ErrUnknownFormat = errors.New("not a recognised test report")

const sniffBytes = 64 << 10

var (
	tapFirstLine = regexp.MustCompile(`^(TAP version \d+|1\.\.\d+|(not )?ok\b|Bail out!)`)
	utf8BOM      = []byte{0xEF, 0xBB, 0xBF}
)

// detectFormat decides the format from the first bytes of content only; the file name plays no
// part (a JUnit file named .json is JUnit). It returns "" when unsure.
func detectFormat(head []byte, _ string) workitems.ReportFormat {
	head = bytes.TrimPrefix(head, utf8BOM)
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '<' {
		if bytes.Contains(head, []byte("<testsuite")) || bytes.Contains(head, []byte("<testcase")) {
			return FormatJUnit
		}
		return ""
	}
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '{' &&
		(bytes.Contains(head, []byte(`"numTotalTests"`)) || bytes.Contains(head, []byte(`"assertionResults"`))) {
		return FormatJestJSON
	}
	var sc jsonScanner
	var ev rawEvent
	first := true
	for i, line := range bytes.Split(head, []byte("\n")) {
		if i > 200 {
			break
		}
		l := bytes.TrimRight(line, "\r")
		t := bytes.TrimSpace(l)
		if len(t) == 0 {
			continue
		}
		if t[0] == '#' {
			continue // a TAP comment, or build output header before go test -json events
		}
		// TAP is decided by its first meaningful line, so JSON in its diagnostics cannot fool us
		// and an "ok" further down plain output does not make it TAP.
		if first && tapFirstLine.Match(l) {
			return FormatTAP
		}
		first = false
		if t[0] == '{' && sc.decode(t, &ev) == nil && ev.ActionSeen {
			return FormatGoJSON
		}
	}
	return ""
}

// consoleHints recognise a runner's console output (never a report: its format is for people and
// changes between versions) by lines only that runner prints, and name the option that writes a
// report instead. The first match wins.
var consoleHints = []struct {
	tool, option string
	line         *regexp.Regexp
}{
	{"prove", "`prove --formatter TAP::Formatter::JUnit` (JUnit), or the test programs' own TAP with stderr merged (`perl t/x.t 2>&1`; `prove --merge --archive out.tgz` with TAP::Harness::Archive)",
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

// ParseReport reads a report in the given format (auto: detected from content).
func ParseReport(r io.Reader, source string, format workitems.ReportFormat, lim Limits) (*Report, error) {
	br := bufio.NewReaderSize(r, sniffBytes)
	if format == "" || format == FormatAuto {
		head, err := br.Peek(sniffBytes)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("verify: reading %s: %w", source, err)
		}
		format = detectFormat(head, source)
		if format == "" {
			if why := noReport(head); why != "" {
				return nil, fmt.Errorf("verify: %s: %w: %s", source, ErrUnknownFormat, why)
			}
			if tool, option := consoleOutput(head); tool != "" {
				return nil, fmt.Errorf("verify: %s: %w: this is %s's console output, not a report; write one with %s", source, ErrUnknownFormat, tool, option)
			}
			return nil, fmt.Errorf("verify: %s: %w (expected go test -json, JUnit XML, TAP or jest/vitest JSON)", source, ErrUnknownFormat)
		}
	}
	switch format {
	case FormatGoJSON:
		return ParseGoJSON(br, source, lim)
	case FormatJUnit:
		return ParseJUnit(br, source, lim)
	case FormatTAP:
		return ParseTAP(br, source, lim)
	case FormatJestJSON:
		return ParseJestJSON(br, source, lim)
	}
	return nil, fmt.Errorf("verify: %s: format %q: %w", source, format, ErrUnknownFormat)
}

// ParseFile opens and parses one report file.
func ParseFile(path string, format workitems.ReportFormat, lim Limits) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: report: %w", err)
	}
	defer f.Close()
	return ParseReport(f, path, format, lim)
}
