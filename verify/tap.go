package verify

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"outerloop/lib/shorten"
)

// tapFirstLine is how a TAP stream begins: its version, its plan, a first point or a bail out.
var tapFirstLine = regexp.MustCompile(`^(TAP version \d+|1\.\.\d+|(not )?ok\b|Bail out!)`)

// detectTAP decides by the first meaningful line of head (blank lines and `#` comments before
// it are skipped), so JSON in a stream's diagnostics cannot make it something else and an "ok"
// further down plain output does not make it TAP.
func detectTAP(head []byte) Detection {
	rest := head
	for i := 0; i <= 200 && len(rest) > 0; i++ {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		l := bytes.TrimRight(line, "\r")
		if t := bytes.TrimSpace(l); len(t) == 0 || t[0] == '#' {
			continue
		}
		if tapFirstLine.Match(l) {
			return DetectOpens
		}
		if proveHeader.Match(l) {
			// prove -v: programs' headers, then TAP.
			lines := [][]byte{bytes.TrimRight(l, " \t")}
			for j := 0; j <= 200 && len(rest) > 0; j++ {
				var next []byte
				next, rest, _ = bytes.Cut(rest, []byte("\n"))
				if t := bytes.TrimSpace(next); len(t) == 0 || t[0] == '#' {
					continue
				}
				lines = append(lines, bytes.TrimRight(next, "\r \t"))
				if isProve, decided := proveOpening(lines); decided {
					if isProve {
						return DetectOpens
					}
					break
				}
			}
		}
		return DetectNone
	}
	return DetectNone
}

// ParseTAP reads a TAP 13/14 stream: version line, plan first or last (`1..N`, `1..0 # SKIP`),
// test points with `# SKIP` / `# TODO` directives (`not ok # TODO` is not a failure), YAML
// diagnostic blocks, `Bail out!`, comments and indented subtests (TAP 14, 4 spaces per level).
// A missing plan, a plan that does not match the top-level test points, or a bail out makes the
// report incomplete, so it can never close an item.
func ParseTAP(r io.Reader, source string, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	p := &tapParser{lim: lim, rep: &Report{Source: source, Format: FormatTAP, Declared: unknownCounts(), Complete: true},
		ids: map[string]*TestCase{}}
	lr := newLineReader(r, lim.MaxLine)
	// The first two meaningful lines tell prove -v's output (a program's header, then its TAP)
	// from a TAP stream; the lines up to them are held, then replayed to the parser chosen.
	var held []string
	var meaningful [][]byte
	var prove *proveParser
	decided, read := false, 0
	feed := func(line string) {
		if prove != nil {
			prove.line(line)
		} else {
			p.lineNo++
			p.line(line)
		}
	}
	decide := func() {
		decided = true
		if isProve, _ := proveOpening(meaningful); isProve {
			prove = newProveParser(source, lim)
		}
		for _, l := range held {
			feed(l)
		}
		held = nil
	}
	for {
		line, cut, eol, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("verify: reading %s: %w", source, err)
		}
		read++
		if cut {
			p.rep.warn(lim.MaxWarn, "line %d longer than %d bytes, cut", read, lim.MaxLine)
		}
		if !eol && strings.TrimSpace(string(line)) != "" {
			p.cutLast = true
		}
		if decided {
			feed(string(line))
			continue
		}
		held = append(held, string(line))
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			meaningful = append(meaningful, []byte(strings.TrimRight(string(line), "\r \t")))
		}
		if _, ok := proveOpening(meaningful); ok || len(held) > 256 {
			decide()
		}
	}
	if !decided {
		decide()
	}
	if prove != nil {
		if p.cutLast {
			prove.rep.Complete = false
			prove.rep.warn(lim.MaxWarn, "last line cut off")
		}
		return prove.finish(), nil
	}
	return p.finish(), nil
}

var (
	tapVersion = regexp.MustCompile(`^TAP version (\d+)\s*$`)
	tapPlan    = regexp.MustCompile(`^1\.\.(\d+)\s*(#\s*(.*))?$`)
	tapPoint   = regexp.MustCompile(`^(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?(.*)$`)
	tapSubName = regexp.MustCompile(`^#\s*Subtest:\s*(.*)$`)
	// Test::More's (and Test2's) diagnostics for a program that failed outside its points.
	tapExitDiag = regexp.MustCompile(`^#\s*Looks like your test (exited with [1-9]\d*|died)\b`)
	// Diagnostics only one producer writes name the flavour (a green stream has none).
	tapMoreDiag = regexp.MustCompile(`^#\s+(Failed (\(TODO\) )?test\b|Looks like (you failed|your test (exited|died))\b|No tests run!)`)
	tapBatsDiag = regexp.MustCompile("^#\\s+\\((in test file |from function `)|^# bats warning: ")
	// The summaries that end a failing point's diagnostics.
	tapDiagEnd = regexp.MustCompile(`^#\s*(Looks like |bats warning: )`)
)

// The TAP producers told apart by their diagnostics (Report.Flavor).
const (
	flavorTestMore = "test-more"
	flavorBats     = "bats"
)

type tapLevel struct {
	plan     int // -1 until seen
	points   int
	subtest  string // name announced by "# Subtest:" for the coming parent point
	lastNum  int
	planLast bool
}

type tapParser struct {
	lim     Limits
	rep     *Report
	lineNo  int
	cutLast bool
	levels  []*tapLevel
	ids     map[string]*TestCase
	dropped Counts
	listed  Counts

	yamlIndent int // >0 while inside a YAML block, its indent
	yamlRun    *TestRun
	yamlOut    tail
	yamlBlock  bool // the message is the next line of a block scalar
	lastRun    *TestRun
	diagRun    *TestRun // the failing top-level point whose diagnostics may follow
	lastIndent int
	sawAny     bool
	nodeFiles  int    // top-level points that were node's file entries, not tests
	exitDiag   string // Test::More's "# Looks like your test exited with N …"
}

func (p *tapParser) level(depth int) *tapLevel {
	for len(p.levels) <= depth {
		p.levels = append(p.levels, &tapLevel{plan: -1})
	}
	return p.levels[depth]
}

func (p *tapParser) line(raw string) {
	indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
	text := strings.TrimRight(raw[indent:], " \t")
	if p.yamlIndent > 0 {
		if indent >= p.yamlIndent && text != "..." || text == "" {
			if p.yamlRun != nil {
				p.yamlOut.write([]byte(raw[min(len(raw), p.yamlIndent):] + "\n"))
				p.yamlMessage(text)
			}
			return
		}
		if text == "..." {
			p.endYAML()
			return
		}
		p.endYAML() // a block without its "..." end
	}
	if text == "" {
		return
	}
	depth := indent / 4
	switch {
	case text == "---" && p.lastRun != nil && indent >= p.lastIndent:
		p.yamlIndent = max(indent, 1)
		p.yamlRun = p.lastRun
		p.yamlOut = tail{n: p.lim.OutputTail}
		return
	case strings.HasPrefix(text, "Bail out!"):
		p.sawAny = true
		p.rep.Bailed = true
		p.rep.Complete = false
		reason := strings.TrimSpace(strings.TrimPrefix(text, "Bail out!"))
		p.rep.warn(p.lim.MaxWarn, "bail out: %s", reason)
		if p.rep.FirstError == "" {
			p.rep.FirstError = "Bail out! " + reason
		}
		return
	case tapVersion.MatchString(text):
		p.sawAny = true
		if m := tapVersion.FindStringSubmatch(text); depth == 0 {
			p.rep.Flavor = "tap" + m[1]
		}
		return
	case strings.HasPrefix(text, "#"):
		if m := tapSubName.FindStringSubmatch(text); m != nil {
			p.level(depth).subtest = strings.TrimSpace(m[1])
		}
		if depth == 0 && p.exitDiag == "" && tapExitDiag.MatchString(text) {
			p.exitDiag = shorten.Clip(strings.TrimSpace(strings.TrimPrefix(text, "#")), 300)
		}
		if depth == 0 {
			p.comment(text)
		}
		return
	}
	p.diagRun = nil
	if m := tapPlan.FindStringSubmatch(text); m != nil {
		p.sawAny = true
		lv := p.level(depth)
		n, _ := strconv.Atoi(m[1])
		if lv.plan >= 0 {
			p.rep.warn(p.lim.MaxWarn, "line %d: a second plan", p.lineNo)
			p.rep.Complete = false
		}
		lv.plan, lv.planLast = n, lv.points > 0
		if depth == 0 {
			p.rep.Declared = Counts{Total: n, Passed: -1, Failed: -1, Errored: -1, Skipped: -1}
		}
		return
	}
	if m := tapPoint.FindStringSubmatch(text); m != nil {
		p.sawAny = true
		p.point(depth, indent, m[1] == "ok", m[2], m[3])
		return
	}
	if depth == 0 {
		p.rep.warn(p.lim.MaxWarn, "line %d is not TAP: %q", p.lineNo, shorten.Clip(text, 80))
	}
}

// comment reads a top-level comment: a diagnostic only Test::More or bats writes names the
// flavour, and then the comments right after a failing point are its message (the failed
// test's file, line and got/expected; bats' failed command).
func (p *tapParser) comment(text string) {
	if p.rep.Flavor == "" {
		switch {
		case tapMoreDiag.MatchString(text):
			p.rep.Flavor = flavorTestMore
		case tapBatsDiag.MatchString(text):
			p.rep.Flavor = flavorBats
		}
	}
	r := p.diagRun
	if r == nil || p.rep.Flavor != flavorTestMore && p.rep.Flavor != flavorBats || tapDiagEnd.MatchString(text) {
		p.diagRun = nil
		return
	}
	if len(r.Message) >= 300 {
		return
	}
	line := strings.TrimSpace(strings.TrimPrefix(text, "#"))
	if r.Message != "" {
		line = r.Message + " " + line
	}
	r.Message = shorten.Clip(line, 300)
	if p.rep.Flavor == flavorTestMore {
		p.rep.convention(ConvTestMoreDiag)
	} else {
		p.rep.convention(ConvBatsTAPDiag)
	}
}

// yamlMessage takes the failure message from a diagnostic block: the value of "message",
// "msg" or "error" (the first line of a block scalar).
func (p *tapParser) yamlMessage(text string) {
	if p.yamlRun.Message != "" {
		return
	}
	if p.yamlBlock {
		if text != "" {
			p.yamlRun.Message = shorten.Clip(text, 300)
		}
		return
	}
	k, v, ok := strings.Cut(text, ":")
	if !ok || (k != "message" && k != "msg" && k != "error") {
		return
	}
	v = strings.TrimSpace(v)
	if v == "" || strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
		p.yamlBlock = true
		return
	}
	p.yamlRun.Message = shorten.Clip(strings.Trim(v, `"'`), 300)
}

func (p *tapParser) endYAML() {
	p.yamlBlock = false
	if p.yamlRun != nil {
		p.yamlRun.Output = p.yamlOut.String()
	}
	p.yamlIndent, p.yamlRun = 0, nil
}

// splitDirective separates "desc # SKIP why" into its parts; "\#" is not a directive.
func splitDirective(s string) (desc, directive, reason string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] != '#' {
			continue
		}
		rest := strings.TrimSpace(s[i+1:])
		word, why, _ := strings.Cut(rest, " ")
		switch w := strings.ToUpper(word); {
		case strings.HasPrefix(w, "SKIP"):
			return strings.TrimSpace(s[:i]), "skip", strings.TrimSpace(why)
		case w == "TODO":
			return strings.TrimSpace(s[:i]), "todo", strings.TrimSpace(why)
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(s, `\#`, "#")), "", ""
}

func (p *tapParser) point(depth, indent int, ok bool, num, rest string) {
	lv := p.level(depth)
	hadSubtests := false
	// A point closes every deeper level (their subtests ended).
	for d := depth + 1; d < len(p.levels); d++ {
		hadSubtests = hadSubtests || p.levels[d].points > 0
		p.closeLevel(d)
	}
	p.levels = p.levels[:depth+1]
	lv.points++
	if n, err := strconv.Atoi(num); err == nil {
		if n != lv.lastNum+1 {
			p.rep.warn(p.lim.MaxWarn, "line %d: test %d out of sequence (expected %d)", p.lineNo, n, lv.lastNum+1)
		}
		lv.lastNum = n
	} else {
		lv.lastNum++
	}
	desc, directive, reason := splitDirective(rest)
	name := desc
	if name == "" {
		name = fmt.Sprintf("#%d", lv.lastNum)
	}
	var path []string
	for d := 0; d < depth; d++ {
		if s := p.levels[d].subtest; s != "" {
			path = append(path, s)
		}
	}
	id := strings.Join(append(path, name), " > ")
	run := TestRun{Outcome: OutcomePass}
	switch {
	case directive == "skip":
		run.Outcome, run.Message = OutcomeSkip, reason
	case directive == "todo" && !ok:
		run.Outcome, run.Message = OutcomeSkip, "TODO "+reason // an expected failure
	case depth == 0 && !ok && desc == "setup_file failed" && p.rep.Flavor == "":
		// bats: its setup_file failed, so no test ran (bats' own words, its only point).
		run.Outcome = OutcomeError
		p.rep.Flavor = flavorBats
		p.rep.convention(ConvBatsSetupFile)
	case !ok:
		run.Outcome = OutcomeFail
	}
	if depth == 0 && ok && directive == "" && !hadSubtests && isTestFilePath(name) {
		// node --test: a file that defines no tests is one passing point named by its path.
		// It is not a test; the plan still counts it.
		p.rep.convention(ConvNodeFile)
		p.nodeFiles++
		p.levels[depth].subtest = ""
		p.lastRun = nil
		return
	}
	if directive == "todo" && !ok {
		p.rep.convention(ConvTAPTodo)
	}
	if depth == 0 {
		p.listed.add(run.Outcome)
	}
	tc, have := p.ids[id]
	if !have {
		if len(p.rep.Tests) >= p.lim.MaxTests {
			p.rep.Dropped++
			p.dropped.add(run.Outcome)
			p.lastRun = nil
			return
		}
		tc = &TestCase{ID: id, Suite: strings.Join(path, " > "), Name: name}
		p.ids[id] = tc
		p.rep.Tests = append(p.rep.Tests, tc)
	} else {
		// tape names points by assertion: repeated names are runs of one invocation.
		p.rep.warn(p.lim.MaxWarn, "line %d: test %q appears twice", p.lineNo, id)
		p.rep.convention(ConvTAPRepeat)
	}
	tc.Runs = append(tc.Runs, run)
	p.lastRun = &tc.Runs[len(tc.Runs)-1]
	if depth == 0 && run.Outcome.Bad() {
		p.diagRun = p.lastRun
	}
	p.lastIndent = indent
	if depth < len(p.levels) {
		p.levels[depth].subtest = ""
	}
}

// closeLevel checks a finished subtest level's plan.
func (p *tapParser) closeLevel(d int) {
	lv := p.levels[d]
	if lv.plan >= 0 && lv.plan != lv.points {
		p.rep.warn(p.lim.MaxWarn, "subtest plan 1..%d but %d tests", lv.plan, lv.points)
	}
}

func (p *tapParser) finish() *Report {
	p.endYAML()
	rep := p.rep
	if !p.sawAny {
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "no TAP lines")
	}
	if p.cutLast {
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "last line cut off")
	}
	top := p.level(0)
	switch {
	case top.plan < 0:
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "no plan (1..N): the stream may have stopped early")
	case top.plan != top.points:
		rep.Complete = false
		rep.warn(p.lim.MaxWarn, "plan 1..%d but %d tests", top.plan, top.points)
	}
	if p.exitDiag != "" {
		// The program failed after (or between) its points: the stream's only sign of it.
		tc := &TestCase{ID: "(exit)", Name: "(exit)", Runs: []TestRun{{Outcome: OutcomeError, Message: p.exitDiag}}}
		rep.Tests = append(rep.Tests, tc)
		rep.convention(ConvTAPExitStatus)
		if rep.FirstError == "" {
			rep.FirstError = p.exitDiag
		}
	}
	// A program may fail after a complete plan with nothing on stdout to say so (Test::More
	// writes its "Looks like your test died" to stderr): only the exit status shows it.
	rep.ExitStatusNeeded = "a TAP stream shows only its points: a program that died or exited non-zero after them leaves it green (Test::More says why on stderr)"
	rep.convention(ConvTAPOutside)
	rep.tally(p.dropped)
	rep.Listed = p.listed           // the plan does not count the (exit) case either
	rep.Listed.Total += p.nodeFiles // the plan counts node's file entries; they are not tests
	if rep.FirstError == "" {
		rep.FirstError = firstReportError(rep)
	}
	return rep
}
