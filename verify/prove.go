package verify

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"outerloop/lib/shorten"
)

// prove -v's console output: each test program's TAP between prove's `t/x.t .. ` headers, prove's
// verdict on the program after its stream (`ok`, `Dubious, test returned N`, `Failed n/m
// subtests`, `skipped: why`), then its summary (`All tests successful.` or `Test Summary
// Report`, `Files=N, Tests=M`, `Result: PASS|FAIL`). It is read as TAP of flavour
// flavorProve (ConvProveVerbose): each program's stream is parsed as TAP of its own, its tests
// named `<program>.<test>`; a program prove calls dubious (it exited non-zero or died) is an
// error case `<program>.(exit)`; the Result line is prove's exit status (prove exits non-zero
// exactly when it says FAIL), so the report needs no other; a report without it was cut off
// and never closes.

const flavorProve = "prove"

var (
	// A program's header; with -v nothing follows it on its line (its TAP follows).
	proveHeader = regexp.MustCompile(`^(\S+) \.{2,}(?: (.*))?$`)
	// prove's verdict on a program after its stream.
	proveDubious = regexp.MustCompile(`^Dubious, test returned \d+`)
	proveVerdict = regexp.MustCompile(`^(ok(?: +\d+ ms)?|Failed \d+/\d+ subtests|All \d+ subtests passed|No subtests run|skipped: .*)$`)
	proveFiles   = regexp.MustCompile(`^Files=(\d+), Tests=(\d+),`)
	proveResult  = regexp.MustCompile(`^Result: (PASS|FAIL|NOTESTS)$`)
)

// proveOpening tells from the first meaningful lines whether they open prove -v's output:
// programs skipped whole (`x.t .. skipped: why`), then a bare program header followed by TAP.
// decided is false while more lines are needed.
func proveOpening(lines [][]byte) (isProve, decided bool) {
	for i, l := range lines {
		m := proveHeader.FindSubmatch(l)
		switch {
		case m == nil:
			return false, true
		case bytes.HasPrefix(m[2], []byte("skipped: ")):
			continue
		case len(m[2]) > 0:
			return false, true
		case i+1 == len(lines):
			return false, false
		default:
			return tapFirstLine.Match(lines[i+1]), true
		}
	}
	return false, false
}

// proveParser reads prove -v's output, one tapParser per program.
type proveParser struct {
	lim     Limits
	rep     *Report
	prog    string     // the open program's name
	sub     *tapParser // its stream; nil between programs (stderr of any of them) and in the summary
	summary bool       // after the last program: prove's summary
	result  string     // PASS, FAIL or NOTESTS
	listed  Counts
	dropped Counts
	lineNo  int
}

func newProveParser(source string, lim Limits) *proveParser {
	return &proveParser{lim: lim, rep: &Report{Source: source, Format: FormatTAP, Flavor: flavorProve,
		Declared: unknownCounts(), Complete: true}}
}

func (p *proveParser) line(raw string) {
	p.lineNo++
	text := strings.TrimRight(raw, " \t\r")
	if m := proveResult.FindStringSubmatch(text); m != nil {
		p.endProgram("")
		p.summary, p.result = true, m[1]
		return
	}
	if m := proveFiles.FindStringSubmatch(text); m != nil {
		p.endProgram("")
		p.summary = true
		if n, err := strconv.Atoi(m[2]); err == nil {
			p.rep.Declared.Total = n
		}
		return
	}
	if text == "All tests successful." || text == "Test Summary Report" {
		p.endProgram("")
		p.summary = true
		return
	}
	if p.summary {
		return // the summary repeats what the programs' verdicts said
	}
	if m := proveHeader.FindStringSubmatch(text); m != nil && !tapPoint.MatchString(text) {
		p.endProgram("")
		p.prog = m[1]
		p.sub = &tapParser{lim: p.lim, rep: &Report{Source: p.rep.Source, Format: FormatTAP, Declared: unknownCounts(), Complete: true},
			ids: map[string]*TestCase{}}
		if m[2] != "" {
			p.verdict(m[2]) // `x.t .. skipped: why` (skip_all), or a line without -v
		}
		return
	}
	if p.sub != nil && !p.verdict(text) {
		p.sub.lineNo++
		p.sub.line(strings.TrimRight(raw, "\r"))
	}
}

// verdict reads prove's verdict on the open program; false when text is not one.
func (p *proveParser) verdict(text string) bool {
	if p.sub == nil {
		return false
	}
	if proveDubious.MatchString(text) {
		p.endProgram(text)
		return true
	}
	if !proveVerdict.MatchString(text) {
		return false
	}
	switch {
	case strings.HasPrefix(text, "skipped: "):
		why := strings.TrimPrefix(text, "skipped: ")
		p.rep.Tests = append(p.rep.Tests, &TestCase{ID: p.prog, Suite: p.prog, Name: p.prog,
			Runs: []TestRun{{Outcome: OutcomeSkip, Message: "skip_all: " + shorten.Clip(why, 300)}}})
		p.sub = nil // the program planned no tests (1..0): nothing to read
	case text == "No subtests run":
		p.endProgram("No subtests run")
	default:
		p.endProgram("")
	}
	return true
}

// endProgram closes the open program's stream and adds its tests; failed says why prove calls
// the program itself a failure ("" if it does not).
func (p *proveParser) endProgram(failed string) {
	if p.sub == nil {
		return
	}
	sub := p.sub.finish()
	p.sub = nil
	for _, tc := range sub.Tests {
		if tc.ID == "(exit)" {
			continue // the stream's own exit diagnostic: prove's verdict says it below
		}
		tc.ID = p.prog + "." + tc.ID
		tc.Suite = p.prog
		p.rep.Tests = append(p.rep.Tests, tc)
	}
	p.listed.Total += sub.Listed.Total
	p.listed.Failed += sub.Listed.Failed
	p.listed.Skipped += sub.Listed.Skipped
	p.rep.Dropped += sub.Dropped
	p.rep.Bailed = p.rep.Bailed || sub.Bailed
	for _, c := range sub.Conventions {
		if c != ConvTAPOutside && c != ConvTAPExitStatus {
			p.rep.convention(c)
		}
	}
	if failed == "" && !sub.Complete {
		p.rep.Complete = false
	}
	if failed == "" {
		for _, w := range sub.Warnings {
			p.rep.warn(p.lim.MaxWarn, "%s: %s", p.prog, w)
		}
	}
	if failed != "" {
		p.rep.Tests = append(p.rep.Tests, &TestCase{ID: p.prog + ".(exit)", Suite: p.prog, Name: "(exit)",
			Runs: []TestRun{{Outcome: OutcomeError, Message: "prove: " + failed}}})
	}
}

func (p *proveParser) finish() *Report {
	p.endProgram("")
	rep := p.rep
	rep.convention(ConvProveVerbose)
	switch p.result {
	case "":
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "no `Result:` line: prove's output was cut off before its summary")
	case "FAIL":
		if !hasBad(rep) {
			rep.Tests = append(rep.Tests, &TestCase{ID: "(prove)", Name: "(prove)",
				Runs: []TestRun{{Outcome: OutcomeError, Message: "prove: Result: FAIL"}}})
		}
	}
	rep.tally(p.dropped)
	rep.Listed = p.listed // the (exit) cases and skip_all programs are outside prove's Tests=
	if rep.FirstError == "" {
		rep.FirstError = firstReportError(rep)
	}
	return rep
}

func hasBad(r *Report) bool {
	for _, tc := range r.Tests {
		if tc.Final().Bad() {
			return true
		}
	}
	return false
}
