package verify

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"outerloop/lib/shorten"
)

// detectGoJSON finds a test2json event among the first 200 lines of head, after any build
// output (`go: downloading`, compiler errors); it is found inside, so a format that opens the
// head (TAP with JSON in its diagnostics) wins. A head that opens as XML is a document, never an
// event stream.
func detectGoJSON(head []byte) Detection {
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '<' {
		return DetectNone
	}
	var sc jsonScanner
	var ev rawEvent
	rest := head
	for i := 0; i <= 200 && len(rest) > 0; i++ {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' && sc.decode(t, &ev) == nil && ev.ActionSeen {
			return DetectInside
		}
	}
	return DetectNone
}

// ParseGoJSON reads a `go test -json` stream (test2json events, one per line, possibly mixed with
// non-JSON lines such as compiler output) and returns its evidence. Memory is bounded by lim: a
// tail of output per running test and per package, and at most lim.MaxTests kept test cases.
// The error is only for a failing reader; a malformed stream is a report with warnings and
// Complete false.
func ParseGoJSON(r io.Reader, source string, lim Limits) (*Report, error) {
	p := newGoJSONParser(source, lim)
	lr := newLineReader(r, p.lim.MaxLine)
	var ev rawEvent
	for {
		line, cut, eol, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("verify: reading %s: %w", source, err)
		}
		if cut {
			p.rep.warn(p.lim.MaxWarn, "line %d longer than %d bytes, cut", p.lineNo+1, p.lim.MaxLine)
		}
		p.lineNo++
		if len(line) > 0 && line[0] == '{' && p.sc.decode(line, &ev) == nil && ev.ActionSeen {
			p.event(&ev)
			continue
		}
		if !eol && len(bytes.TrimSpace(line)) > 0 {
			p.cutLast = true
			p.rep.warn(p.lim.MaxWarn, "last line cut off: %q", shorten.Clip(string(line), 80))
			continue
		}
		p.stray(line)
	}
	return p.finish(), nil
}

// goRun is a test's open run: created on "run", finished on its pass/fail/skip or when its
// package ends. Finished runs are recycled with their output buffers.
type goRun struct {
	name  string
	tc    *TestCase // nil while the test is not kept (MaxTests reached)
	out   tail
	first string // first meaningful output line
	loc   string // latest "file.go:N: message" line: errors tend to follow logs
	panic string // a "panic:" line wins over both
}

// message is the line that best explains the run's outcome.
func (r *goRun) message() string {
	switch {
	case r.panic != "":
		return r.panic
	case r.loc != "":
		return r.loc
	}
	return r.first
}

// note looks at one output chunk for a message. It works on bytes and converts only the lines
// it keeps: output events are most of a stream.
func (r *goRun) note(out []byte) {
	for len(out) > 0 {
		var line []byte
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			line, out = out, nil
		}
		l := bytes.TrimSpace(line)
		if len(l) == 0 || bytes.HasPrefix(l, []byte("=== ")) || bytes.HasPrefix(l, []byte("--- PASS")) ||
			bytes.HasPrefix(l, []byte("--- FAIL")) || bytes.HasPrefix(l, []byte("--- SKIP")) {
			continue
		}
		switch {
		case bytes.HasPrefix(l, []byte("panic: ")):
			if r.panic == "" {
				r.panic = shorten.Clip(string(l), 300)
			}
		case isGoLoc(l):
			r.loc = shorten.Clip(string(l), 300)
		case r.first == "":
			r.first = shorten.Clip(string(l), 300)
		}
	}
}

// isCompileErr reports whether l starts like "file.go:12: " or "file.go:12:5: " (a compiler
// error), in linear time.
func isCompileErr(l []byte) bool {
	i := bytes.Index(l, []byte(".go:"))
	if i <= 0 || bytes.IndexByte(l[:i], ' ') >= 0 {
		return false
	}
	rest := l[i+4:]
	digits := func() bool {
		k := 0
		for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
			k++
		}
		rest = rest[k:]
		return k > 0
	}
	if !digits() {
		return false
	}
	if bytes.HasPrefix(rest, []byte(": ")) {
		return true
	}
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	rest = rest[1:]
	return digits() && bytes.HasPrefix(rest, []byte(": "))
}

// isGoLoc reports whether l starts like "name.go:12: " (a t.Log / t.Error line).
func isGoLoc(l []byte) bool {
	i := bytes.Index(l, []byte(".go:"))
	if i <= 0 || bytes.IndexByte(l[:i], ' ') >= 0 {
		return false
	}
	j := i + 4
	k := j
	for k < len(l) && l[k] >= '0' && l[k] <= '9' {
		k++
	}
	return k > j && k+1 < len(l) && l[k] == ':' && l[k+1] == ' '
}

type goPkg struct {
	name     string
	ended    bool
	timedOut bool   // "panic: test timed out" seen in this run
	bad      int    // bad test outcomes in this run
	round    int    // invocations of the package seen before this one (gotestsum reruns)
	firstErr string // first meaningful package-level output line
	out      tail
	cases    map[string]*TestCase
	open     map[string]*goRun
}

// restart begins another invocation of an ended package: a rerun.
func (g *goPkg) restart() {
	g.ended, g.timedOut, g.bad = false, false, 0
	g.round++
}

// isBenchmark reports whether a test2json name is a benchmark (or a sub-benchmark).
func isBenchmark(name string) bool {
	return strings.HasPrefix(name, "Benchmark") && (len(name) == 9 || !isLower(name[9]))
}

func isLower(b byte) bool { return b >= 'a' && b <= 'z' }

type goJSONParser struct {
	lim        Limits
	rep        *Report
	sc         jsonScanner
	pkgs       map[string]*goPkg
	order      []*goPkg
	buildOut   map[string][]string // import path → first lines of its build output
	dropped    Counts
	free       []*goRun
	failKept   int // failing tests kept beyond MaxTests
	lineNo     int
	cutLast    bool
	strayLines int
	strayErrs  []string
}

func newGoJSONParser(source string, lim Limits) *goJSONParser {
	return &goJSONParser{
		lim:      lim.withDefaults(),
		rep:      &Report{Source: source, Format: FormatGoJSON, Declared: unknownCounts(), Complete: true},
		pkgs:     map[string]*goPkg{},
		buildOut: map[string][]string{},
	}
}

func (p *goJSONParser) pkg(name []byte) *goPkg {
	if g, ok := p.pkgs[string(name)]; ok {
		return g
	}
	g := &goPkg{name: string(name), cases: map[string]*TestCase{}, open: map[string]*goRun{},
		out: tail{n: p.lim.OutputTail}}
	p.pkgs[g.name] = g
	p.order = append(p.order, g)
	return g
}

// beginRun opens a new run of a test, creating the case on first sight while fewer than
// MaxTests are kept.
func (p *goJSONParser) beginRun(g *goPkg, test []byte) *goRun {
	if g.ended { // a rerun of the package (gotestsum --rerun-fails) starts a fresh run
		g.restart()
	}
	tc, ok := g.cases[string(test)]
	if !ok && len(p.rep.Tests) < p.lim.MaxTests {
		name := string(test)
		tc = &TestCase{ID: g.name + "." + name, Suite: g.name, Name: name}
		p.rep.Tests = append(p.rep.Tests, tc)
		g.cases[name] = tc
	}
	if ok && len(tc.Runs) > 0 && tc.Runs[len(tc.Runs)-1].Rerun == g.round {
		p.rep.convention(ConvGoInvocation) // -count=N: another run in the same invocation
	}
	if old := g.open[string(test)]; old != nil {
		// A second "run" without an end: the first stays incomplete.
		p.finishRun(g, old, OutcomeIncomplete, "started again before it ended", 0)
	}
	var r *goRun
	if n := len(p.free); n > 0 {
		r, p.free = p.free[n-1], p.free[:n-1]
		*r = goRun{out: tail{n: p.lim.OutputTail, buf: r.out.buf[:0]}}
	} else {
		r = &goRun{out: tail{n: p.lim.OutputTail}}
	}
	r.tc = tc
	if tc != nil {
		r.name = tc.Name
	} else {
		r.name = string(test)
	}
	g.open[r.name] = r
	return r
}

// finishRun records a run's outcome and recycles it. A test beyond MaxTests is only counted,
// unless it failed: failing tests are kept (up to MaxTests more) so their ids reach the retry.
func (p *goJSONParser) finishRun(g *goPkg, r *goRun, o TestOutcome, msg string, elapsed time.Duration) {
	delete(g.open, r.name)
	run := TestRun{Outcome: o, Elapsed: elapsed, Message: msg, Rerun: g.round}
	if o.Bad() {
		run.Output = r.out.String()
		g.bad++
	}
	tc := r.tc
	if tc == nil && o.Bad() && p.failKept < p.lim.MaxTests {
		p.failKept++
		tc = &TestCase{ID: g.name + "." + r.name, Suite: g.name, Name: r.name}
		p.rep.Tests = append(p.rep.Tests, tc)
		g.cases[r.name] = tc
	}
	if tc != nil {
		tc.Runs = append(tc.Runs, run)
	} else {
		p.rep.Dropped++
		p.dropped.add(o)
	}
	p.free = append(p.free, r)
}

func (p *goJSONParser) event(ev *rawEvent) {
	switch ev.Action {
	case actBuildOutput:
		if ip := string(ev.ImportPath); len(p.buildOut[ip]) < 20 {
			if l := strings.TrimRight(string(ev.Output), "\n"); l != "" && !strings.HasPrefix(l, "# ") {
				p.buildOut[ip] = append(p.buildOut[ip], shorten.Clip(l, 300))
			}
		}
		return
	case actBuildFail:
		if _, ok := p.buildOut[string(ev.ImportPath)]; !ok {
			p.buildOut[string(ev.ImportPath)] = nil
		}
		return
	}
	if len(ev.Package) == 0 {
		return
	}
	g := p.pkg(ev.Package)
	if len(ev.Test) == 0 {
		p.pkgEvent(g, ev)
		return
	}
	switch ev.Action {
	case actRun:
		p.beginRun(g, ev.Test)
	case actOutput:
		r := g.open[string(ev.Test)]
		if r == nil {
			r = p.beginRun(g, ev.Test)
		}
		r.out.write(ev.Output)
		r.note(ev.Output)
		if bytes.Contains(ev.Output, []byte(timeoutPanic)) {
			g.timedOut = true
		}
	case actPass, actFail, actSkip:
		r := g.open[string(ev.Test)]
		if r == nil {
			r = p.beginRun(g, ev.Test)
		}
		elapsed := time.Duration(ev.Elapsed * float64(time.Second))
		switch ev.Action {
		case actPass:
			p.finishRun(g, r, OutcomePass, "", elapsed)
		case actSkip:
			p.finishRun(g, r, OutcomeSkip, r.message(), elapsed)
		case actFail:
			p.finishRun(g, r, OutcomeFail, r.message(), elapsed)
		}
	}
}

const timeoutPanic = "panic: test timed out"

func (p *goJSONParser) pkgEvent(g *goPkg, ev *rawEvent) {
	switch ev.Action {
	case actStart:
		if g.ended {
			g.restart()
		}
	case actOutput:
		g.out.write(ev.Output)
		if bytes.Contains(ev.Output, []byte(timeoutPanic)) {
			g.timedOut = true
		}
		o := string(ev.Output)
		if strings.Contains(o, "[build failed]") || strings.Contains(o, "[setup failed]") {
			p.rep.BuildFailed = true
		}
		if g.firstErr == "" {
			g.firstErr = pkgErrorLine(o)
		}
	case actPass, actFail, actSkip:
		g.ended = true
		for _, r := range g.open {
			if isBenchmark(r.name) && !g.timedOut {
				// A benchmark that ran to the end has a run event and no pass event: it is
				// not a test, so it is neither a pass nor an unfinished test. One that
				// crashed fails the package, which the "(package)" case below reports.
				delete(g.open, r.name)
				p.free = append(p.free, r)
				p.rep.convention(ConvGoBenchmark)
				continue
			}
			if g.timedOut {
				p.finishRun(g, r, OutcomeTimeout, cmp.Or(r.panic, "test timed out"), 0)
			} else {
				p.finishRun(g, r, OutcomeIncomplete,
					cmp.Or(r.message(), "no final result (the test binary exited: panic, os.Exit or crash)"), 0)
			}
		}
		if ev.Action != actFail {
			return
		}
		if fb := string(ev.FailedBuild); fb != "" {
			p.rep.BuildFailed = true
			errs := p.buildOut[fb]
			if len(errs) == 0 {
				errs = []string{"build of " + fb + " failed"}
			}
			for _, e := range errs {
				if len(p.rep.BuildErrors) < 20 && !containsStr(p.rep.BuildErrors, e) {
					p.rep.BuildErrors = append(p.rep.BuildErrors, e)
				}
			}
			return
		}
		if g.bad == 0 && !p.rep.BuildFailed {
			// The package failed but no test did: TestMain exit, os.Exit, an init panic, vet.
			msg := g.firstErr
			if msg == "" {
				msg = "package failed with no failing test (TestMain or os.Exit)"
			}
			name := "(package)"
			tc, ok := g.cases[name]
			if !ok {
				tc = &TestCase{ID: g.name + "." + name, Suite: g.name, Name: name}
				g.cases[name] = tc
				p.rep.Tests = append(p.rep.Tests, tc)
			}
			tc.Runs = append(tc.Runs, TestRun{Outcome: OutcomeError, Message: msg, Output: g.out.String(), Rerun: g.round})
			p.rep.convention(ConvGoPackage)
		}
	}
}

// stray handles a line that is not a test2json event.
func (p *goJSONParser) stray(line []byte) {
	s := strings.TrimSpace(string(line))
	if s == "" {
		return
	}
	p.strayLines++
	if p.strayLines <= 3 {
		p.rep.warn(p.lim.MaxWarn, "line %d is not a go test -json event: %q", p.lineNo, shorten.Clip(s, 80))
	}
	if strings.Contains(s, "[build failed]") || strings.Contains(s, "[setup failed]") {
		p.rep.BuildFailed = true
	}
	if isCompileErr([]byte(s)) && len(p.strayErrs) < 20 {
		p.strayErrs = append(p.strayErrs, shorten.Clip(s, 300))
	}
}

func (p *goJSONParser) finish() *Report {
	rep := p.rep
	if len(p.order) == 0 {
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "no go test -json events")
	}
	if p.cutLast {
		rep.Complete = false
	}
	for _, g := range p.order {
		if g.ended {
			continue
		}
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "package %s has no final result (stream cut off or killed)", g.name)
		for _, r := range g.open {
			o := OutcomeIncomplete
			if g.timedOut {
				o = OutcomeTimeout
			}
			p.finishRun(g, r, o, "no final result", 0)
		}
	}
	if rep.BuildFailed && len(rep.BuildErrors) == 0 {
		rep.BuildErrors = p.strayErrs
		for ip, errs := range p.buildOut {
			if len(rep.BuildErrors) == 0 && len(errs) > 0 {
				rep.BuildErrors = errs
				_ = ip
			}
		}
	}
	// Benchmarks leave cases without runs behind.
	rep.Tests = slices.DeleteFunc(rep.Tests, func(t *TestCase) bool { return len(t.Runs) == 0 })
	rep.tally(p.dropped)
	rep.FirstError = firstReportError(rep)
	if rep.FirstError == "" {
		for _, g := range p.order {
			if g.firstErr != "" && rep.Observed.Bad() > 0 {
				rep.FirstError = g.firstErr
				break
			}
		}
	}
	return rep
}

// firstReportError is the build error, or the message of the first failing test, preferring
// tests that failed with a message over parents and tests that merely did not finish.
func firstReportError(rep *Report) string {
	if rep.BuildFailed && len(rep.BuildErrors) > 0 {
		return rep.BuildErrors[0]
	}
	for pass := 0; pass < 3; pass++ {
		for _, t := range rep.Tests {
			r := t.FirstBad()
			if r == nil || !t.Final().Bad() {
				continue
			}
			switch {
			case pass == 0 && r.Message != "" && r.Outcome != OutcomeIncomplete:
				return t.Name + ": " + r.Message
			case pass == 1 && r.Message != "":
				return t.Name + ": " + r.Message
			case pass == 2:
				return t.Name + ": " + string(t.Final())
			}
		}
	}
	return ""
}

// pkgErrorLine returns a package-level output line that explains a failure, or "".
func pkgErrorLine(o string) string {
	for line := range strings.SplitSeq(o, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "", l == "FAIL", l == "PASS", strings.HasPrefix(l, "ok "), strings.HasPrefix(l, "FAIL\t"),
			strings.HasPrefix(l, "FAIL "), strings.HasPrefix(l, "exit status"), strings.HasPrefix(l, "?"),
			strings.HasPrefix(l, "=== "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "testing: warning"):
			continue
		}
		return shorten.Clip(l, 300)
	}
	return ""
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
