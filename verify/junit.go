package verify

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ParseJUnit reads a JUnit XML report token by token (Surefire, pytest xunit1/xunit2,
// jest-junit, gotestsum and friends). Memory is bounded: text runs are cut to a tail before the
// XML decoder sees them, and each test keeps a bounded tail of its output.
//
// Counting follows the tools: a testcase element is one run; several elements with one id are
// several runs of one test (gotestsum reruns, pytest's call failure plus teardown error);
// Surefire's flakyFailure/flakyError are failed runs before the final pass and its
// rerunFailure/rerunError failed runs after the first failure.
func ParseJUnit(r io.Reader, source string, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	p := &junitParser{lim: lim, rep: &Report{Source: source, Format: FormatJUnit, Declared: unknownCounts(), Complete: true},
		cases: map[string]*TestCase{}}
	src := &readErr{r: r}
	cleaner := newXMLCleaner(src, max(lim.OutputTail, 16<<10))
	dec := xml.NewDecoder(cleaner)
	dec.CharsetReader = charsetReader
	dec.Entity = xml.HTMLEntity // &nbsp; and friends appear in reports written by HTML-minded tools
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if src.err != nil {
				return nil, fmt.Errorf("verify: reading %s: %w", source, src.err)
			}
			// Anything else the decoder refuses is the document's fault: a malformed report.
			p.rep.Complete = false
			p.rep.warn(lim.MaxWarn, "XML error: %v", err)
			break
		}
		p.token(tok)
	}
	if cleaner.cuts > 0 {
		p.rep.warn(lim.MaxWarn, "%d long output sections cut to their last %d bytes", cleaner.cuts, cleaner.keep)
	}
	return p.finish(), nil
}

// readErr remembers the first error of the underlying reader other than EOF, to tell a broken
// file system from a broken document.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// charsetReader converts the single-byte encodings test tools declare; UTF-8 needs nothing.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(strings.TrimSpace(label)) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1":
		return &latin1Reader{r: in}, nil
	case "windows-1252", "cp1252":
		return &latin1Reader{r: in, cp1252: true}, nil
	}
	return nil, fmt.Errorf("unsupported charset %q", label)
}

// latin1Reader turns ISO-8859-1 (or Windows-1252) bytes into UTF-8.
type latin1Reader struct {
	r      io.Reader
	cp1252 bool
	buf    [4 << 10]byte
	out    []byte
}

// cp1252 holds the characters Windows-1252 puts at 0x80–0x9F (0: undefined, kept as is).
var cp1252 = [32]rune{0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
	0x2039, 0x0152, 0, 0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC,
	0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178}

func (l *latin1Reader) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		n, err := l.r.Read(l.buf[:])
		for _, b := range l.buf[:n] {
			r := rune(b)
			if l.cp1252 && b >= 0x80 && b < 0xA0 && cp1252[b-0x80] != 0 {
				r = cp1252[b-0x80]
			}
			l.out = utf8.AppendRune(l.out, r)
		}
		if n == 0 && err != nil {
			return 0, err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	if len(l.out) == 0 {
		l.out = l.out[:0:0]
	}
	return n, nil
}

// junitResult is one result element inside a testcase.
type junitResult struct {
	kind    string // failure | error | skipped | flakyFailure | flakyError | rerunFailure | rerunError
	message string
	text    tail
}

type junitParser struct {
	lim   Limits
	rep   *Report
	depth int
	stack []string
	suite []string // names of open testsuite elements

	rootDecl bool // the root element declared totals itself

	inCase bool
	caseEl struct {
		suite, class, name, file string
		elapsed                  time.Duration
	}
	results []*junitResult
	cur     *junitResult // result element whose text we collect
	out     tail         // system-out / system-err of the case
	inOut   bool

	cases   map[string]*TestCase
	listed  Counts
	dropped Counts
	sawCase bool
	sawRoot bool
}

func attr(se xml.StartElement, name string) (string, bool) {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

func atoiAttr(se xml.StartElement, name string) int {
	v, ok := attr(se, name)
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return -1
	}
	return n
}

// declare adds an element's declared totals to the report's; a count no element declares stays
// unknown (-1) rather than zero.
func (p *junitParser) declare(se xml.StartElement) bool {
	tests := atoiAttr(se, "tests")
	if tests < 0 {
		return false
	}
	d := &p.rep.Declared
	add := func(field *int, names ...string) {
		for _, n := range names {
			if v := atoiAttr(se, n); v >= 0 {
				*field = max(*field, 0) + v
			}
		}
	}
	add(&d.Total, "tests")
	add(&d.Failed, "failures")
	add(&d.Errored, "errors")
	add(&d.Skipped, "skipped", "skips", "disabled")
	return true
}

func (p *junitParser) token(tok xml.Token) {
	switch t := tok.(type) {
	case xml.StartElement:
		name := t.Name.Local
		parent := ""
		if len(p.stack) > 0 {
			parent = p.stack[len(p.stack)-1]
		}
		p.stack = append(p.stack, name)
		p.flavor(t)
		switch {
		case len(p.stack) == 1:
			p.sawRoot = true
			if name != "testsuites" && name != "testsuite" && name != "testcase" {
				p.rep.Complete = false
				p.rep.warn(p.lim.MaxWarn, "root element <%s> is not a JUnit report", name)
			}
			if name == "testsuites" || name == "testsuite" {
				p.rootDecl = p.declare(t)
			}
			if name == "testsuite" {
				v, _ := attr(t, "name")
				p.suite = append(p.suite, v)
			}
			if name == "testcase" {
				p.startCase(t)
			}
		case name == "testsuite":
			// Totals of suites directly under an undeclared <testsuites>; nested suites are
			// already inside their parent's totals, so they are never added twice.
			if len(p.stack) == 2 && !p.rootDecl {
				p.declare(t)
			}
			v, _ := attr(t, "name")
			p.suite = append(p.suite, v)
		case name == "testcase" && !p.inCase:
			p.startCase(t)
		case p.inCase && parent == "testcase":
			switch name {
			case "failure", "error", "skipped", "flakyFailure", "flakyError", "rerunFailure", "rerunError":
				msg, _ := attr(t, "message")
				if msg == "" {
					msg, _ = attr(t, "type")
				}
				p.cur = &junitResult{kind: name, message: msg, text: tail{n: p.lim.OutputTail}}
				p.results = append(p.results, p.cur)
			case "system-out", "system-err":
				p.inOut = true
			}
		}
	case xml.EndElement:
		if len(p.stack) == 0 {
			return
		}
		name := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		switch {
		case name == "testcase" && p.inCase && !p.caseOpenBelow():
			p.endCase()
		case name == "testsuite" && len(p.suite) > 0:
			p.suite = p.suite[:len(p.suite)-1]
		case p.inCase && (name == "system-out" || name == "system-err"):
			p.inOut = false
		case p.cur != nil && len(p.stack) > 0 && p.stack[len(p.stack)-1] == "testcase":
			p.cur = nil
		}
	case xml.CharData:
		switch {
		case p.cur != nil:
			p.cur.text.write(t)
		case p.inOut:
			p.out.write(t)
		}
	}
}

// flavor guesses which tool wrote the report, for people reading the summary.
func (p *junitParser) flavor(se xml.StartElement) {
	if p.rep.Flavor != "" {
		return
	}
	name, _ := attr(se, "name")
	switch se.Name.Local {
	case "testsuites":
		if name == "jest tests" {
			p.rep.Flavor = "jest-junit"
		}
	case "testsuite":
		if name == "pytest" {
			p.rep.Flavor = "pytest"
		}
		for _, a := range se.Attr {
			if a.Name.Local == "noNamespaceSchemaLocation" && strings.Contains(a.Value, "surefire") {
				p.rep.Flavor = "surefire"
			}
		}
	case "flakyFailure", "flakyError", "rerunFailure", "rerunError":
		p.rep.Flavor = "surefire"
	case "property":
		if name == "go.version" {
			p.rep.Flavor = "gotestsum"
		}
	}
}

// caseOpenBelow reports whether a testcase element is still open on the stack (a testcase
// nested in a testcase is not a JUnit shape; the outer one counts).
func (p *junitParser) caseOpenBelow() bool {
	for _, s := range p.stack {
		if s == "testcase" {
			return true
		}
	}
	return false
}

func (p *junitParser) startCase(se xml.StartElement) {
	p.inCase, p.sawCase = true, true
	p.results, p.cur, p.inOut = p.results[:0], nil, false
	p.out = tail{n: p.lim.OutputTail}
	p.caseEl.class, _ = attr(se, "classname")
	p.caseEl.name, _ = attr(se, "name")
	p.caseEl.file, _ = attr(se, "file")
	p.caseEl.suite = ""
	if len(p.suite) > 0 {
		p.caseEl.suite = p.suite[len(p.suite)-1]
	}
	p.caseEl.elapsed = 0
	if v, ok := attr(se, "time"); ok {
		if f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(v), ",", ""), 64); err == nil {
			p.caseEl.elapsed = time.Duration(f * float64(time.Second))
		}
	}
}

func (p *junitParser) endCase() {
	p.inCase = false
	suite := p.caseEl.class
	if suite == "" {
		suite = p.caseEl.suite
	}
	if suite == "" {
		suite = p.caseEl.file
	}
	id := p.caseEl.name
	if suite != "" && suite != p.caseEl.name {
		id = suite + "." + p.caseEl.name
	}
	tc, keep := p.cases[id]
	if !keep {
		if len(p.rep.Tests) < p.lim.MaxTests {
			tc = &TestCase{ID: id, Suite: suite, Name: p.caseEl.name}
			p.rep.Tests = append(p.rep.Tests, tc)
			p.cases[id] = tc
			keep = true
		} else {
			p.rep.Dropped++
		}
	}
	p.listed.Total++
	var main *junitResult
	var before, after []TestRun
	hasFailure, hasError := false, false
	for _, r := range p.results {
		run := TestRun{Message: firstLine(r.message), Output: r.text.String()}
		if run.Message == "" {
			run.Message = firstLine(run.Output)
		}
		switch r.kind {
		case "flakyFailure":
			run.Outcome = OutcomeFail
			before = append(before, run)
		case "flakyError":
			run.Outcome = OutcomeError
			before = append(before, run)
		case "rerunFailure":
			run.Outcome = OutcomeFail
			after = append(after, run)
		case "rerunError":
			run.Outcome = OutcomeError
			after = append(after, run)
		case "failure":
			hasFailure = true
			if main == nil || main.kind == "skipped" {
				main = r
			}
		case "error":
			hasError = true
			if main == nil || main.kind == "skipped" {
				main = r
			}
		case "skipped":
			if main == nil {
				main = r
			}
		}
	}
	final := TestRun{Outcome: OutcomePass, Elapsed: p.caseEl.elapsed}
	if main != nil {
		final.Message = firstLine(main.message)
		final.Output = main.text.String()
		if final.Message == "" || final.Message == "Failed" {
			if m := firstMeaningful(final.Output); m != "" {
				final.Message = m
			}
		}
		switch main.kind {
		case "failure":
			final.Outcome = OutcomeFail
		case "error":
			final.Outcome = OutcomeError
		case "skipped":
			final.Outcome = OutcomeSkip
			p.listed.Skipped++
		}
	}
	if hasFailure {
		p.listed.Failed++
	}
	if hasError {
		p.listed.Errored++
	}
	if final.Outcome.Bad() && final.Output == "" {
		final.Output = p.out.String()
	}
	runs := append(before, final)
	runs = append(runs, after...)
	if keep {
		tc.Runs = append(tc.Runs, runs...)
	} else {
		p.dropped.add(runs[len(runs)-1].Outcome)
	}
}

// firstMeaningful picks the line of a failure text worth quoting: a panic, else the last Go
// "file.go:N:" line (errors follow logs), else an error or assertion line, else the first line.
func firstMeaningful(s string) string {
	first, loc, errLine := "", "", ""
	for line := range strings.SplitSeq(s, "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		switch {
		case strings.HasPrefix(l, "panic:"):
			return clip(l, 300)
		case isGoLoc([]byte(l)):
			loc = l
		case errLine == "" && (strings.HasPrefix(l, "E ") || strings.Contains(l, "Error") || strings.Contains(l, "assert")):
			errLine = l
		}
		if first == "" {
			first = l
		}
	}
	return clip(cmp.Or(loc, errLine, first), 300)
}

func (p *junitParser) finish() *Report {
	rep := p.rep
	if !p.sawRoot {
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "no XML elements")
	}
	if len(p.stack) > 0 && rep.Complete {
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "document ends inside <%s>", p.stack[len(p.stack)-1])
	}
	rep.tally(p.dropped)
	rep.Listed = p.listed
	rep.FirstError = firstReportError(rep)
	return rep
}
