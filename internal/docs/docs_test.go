package docs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"outerloop/proc"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// binary is the outerloop binary TestMain builds for the command checks.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outerloop-docs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "outerloop")
	build := exec.Command("go", "build", "-o", binary, "./cmd/outerloop")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cmd/outerloop: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// documents are the Markdown files the checks read, relative to the root: README.md, every
// docs/*.md, and the policy and benchmark documents that exist.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	for _, f := range []string{"verify/POLICY.md", "verify/BENCHMARKS.md", "BENCHMARKS.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			files = append(files, f)
		}
	}
	sort.Strings(files[1:])
	return files
}

// doc is a Markdown document split into what the checks read.
type doc struct {
	path  string   // relative to the root
	lines []string // the file's lines
	// prose is the text with fenced code blocks and inline code spans blanked out (newlines
	// kept), so links are found only where Markdown renders them and offsets map to lines.
	prose    string
	fences   []fenceLine // every line inside a fenced code block
	inline   []span      // every inline code span outside fenced blocks
	headings []string    // the heading texts outside fenced blocks, in order
}

type fenceLine struct {
	line int // 1-based
	lang string
	text string
}

type span struct {
	line    int // 1-based line the span starts on
	text    string
	command bool // the first cell of a row of a table whose header's first cell is "command"
}

var fenceRE = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")

func readDoc(t *testing.T, rel string) *doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	d := &doc{path: rel, lines: strings.Split(string(b), "\n")}
	prose := make([]string, len(d.lines))
	var fence, lang string
	for i, l := range d.lines {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			if fence == "" {
				fence, lang = m[1][:3], m[2]
				continue
			}
			if strings.HasPrefix(m[1], fence) && strings.TrimSpace(l) == m[1] {
				fence, lang = "", ""
				continue
			}
		}
		if fence != "" {
			d.fences = append(d.fences, fenceLine{line: i + 1, lang: lang, text: l})
			continue
		}
		prose[i] = l
		if h, ok := heading(l); ok {
			d.headings = append(d.headings, h)
		}
	}
	text := strings.Join(prose, "\n")
	// Inline code spans (a span may run over a line break within its paragraph).
	blanked := []byte(text)
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(text) && text[j] == '`' {
			j++
		}
		ticks := text[i:j]
		end := strings.Index(text[j:], ticks)
		if end < 0 || strings.Contains(text[j:j+end], "\n\n") {
			i = j
			continue
		}
		content := text[j : j+end]
		line := strings.Count(text[:i], "\n") + 1
		d.inline = append(d.inline, span{line: line, text: strings.TrimSpace(content)})
		for k := i; k < j+end+len(ticks); k++ {
			if blanked[k] != '\n' {
				blanked[k] = ' '
			}
		}
		i = j + end + len(ticks)
	}
	d.prose = string(blanked)
	d.markCommandTables()
	return d
}

// markCommandTables marks the inline code of the first cell of each row of a table whose
// header's first cell is "command" (the CLI reference: `serve [--addr] …`).
func (d *doc) markCommandTables() {
	inTable := false
	rows := map[int]bool{}
	for i, l := range d.lines {
		s := strings.TrimSpace(l)
		if !strings.HasPrefix(s, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(s, "|"), "|")
		if !inTable {
			inTable = strings.TrimSpace(cells[0]) == "command"
			continue
		}
		rows[i+1] = true
	}
	for i := range d.inline {
		sp := &d.inline[i]
		if !rows[sp.line] {
			continue
		}
		// In the first cell: before the first unescaped '|' after the row's leading one.
		l := strings.TrimSpace(d.lines[sp.line-1])
		first := firstCell(l)
		// A slash command (`/outerloop retry`, a pull request comment) is not the CLI's.
		if !strings.HasPrefix(sp.text, "/") && strings.Contains(first, "`"+sp.text+"`") {
			sp.command = true
		}
	}
}

// firstCell returns the first cell of a table row, honouring \| escapes and code spans.
func firstCell(row string) string {
	row = strings.TrimPrefix(row, "|")
	inCode := false
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\':
			i++
		case row[i] == '`':
			inCode = !inCode
		case row[i] == '|' && !inCode:
			return row[:i]
		}
	}
	return row
}

var headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)

func heading(line string) (string, bool) {
	m := headingRE.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[2], true
}

var inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading: the text as rendered, lower-cased, with everything
// but letters, digits, spaces, hyphens and underscores removed and spaces made hyphens.
func slug(h string) string {
	h = inlineLinkRE.ReplaceAllString(h, "$1")
	h = strings.NewReplacer("`", "", "*", "", "<", "", ">", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors is the set of anchors a document's headings make, with GitHub's -1, -2 … suffixes
// for repeated headings.
func (d *doc) anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, h := range d.headings {
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var linkRE = regexp.MustCompile(`!?\[([^\[\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)

// TestLinks checks every relative link of the documents: its file exists and, for an anchor
// into a Markdown file, a heading there makes that anchor.
func TestLinks(t *testing.T) {
	cache := map[string]*doc{}
	load := func(rel string) *doc {
		if d, ok := cache[rel]; ok {
			return d
		}
		d := readDoc(t, rel)
		cache[rel] = d
		return d
	}
	checked := 0
	for _, rel := range documents(t) {
		d := load(rel)
		for _, m := range linkRE.FindAllStringSubmatchIndex(d.prose, -1) {
			target := d.prose[m[4]:m[5]]
			line := strings.Count(d.prose[:m[0]], "\n") + 1
			if target == "" || strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") ||
				strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := rel
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), file)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", rel, line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, line, target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !load(dest).anchors()[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, line, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the parser is broken")
	}
}

// command is one command of the CLI as its --help describes it.
type command struct {
	path     string
	runnable bool // has a Run (its usage shows more than "[command]")
	children map[string]*command
	flags    map[string]bool // long flag name → takes a value (local and inherited)
}

// cli reads the command tree of the built binary from each command's --help.
func cli(t *testing.T) *command {
	t.Helper()
	var walk func(path []string) *command
	walk = func(path []string) *command {
		out, err := exec.Command(binary, append(append([]string(nil), path...), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("outerloop %s --help: %v\n%s", strings.Join(path, " "), err, out)
		}
		c := &command{path: strings.Join(path, " "), children: map[string]*command{}, flags: map[string]bool{}}
		section := ""
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			l := sc.Text()
			if l != "" && !strings.HasPrefix(l, " ") {
				section = strings.TrimSuffix(l, ":")
				continue
			}
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			switch section {
			case "Usage":
				if f[len(f)-1] != "[command]" {
					c.runnable = true
				}
			case "Available Commands", "Additional Commands":
				if f[0] != "help" && f[0] != "completion" {
					c.children[f[0]] = nil
				}
			case "Flags", "Global Flags":
				if strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "--") && len(f) > 1 {
					f = f[1:] // "-h, --help"
				}
				if !strings.HasPrefix(f[0], "--") {
					continue
				}
				name := strings.TrimPrefix(f[0], "--")
				// "--name type   description" takes a value; "--name   description" does not.
				rest := l[strings.Index(l, f[0])+len(f[0]):]
				c.flags[name] = len(rest) > 1 && rest[0] == ' ' && rest[1] != ' '

			}
		}
		for name := range c.children {
			c.children[name] = walk(append(append([]string(nil), path...), name))
		}
		return c
	}
	root := walk(nil)
	if len(root.children) < 5 || !root.flags["config"] {
		t.Fatalf("the root's --help did not parse: %d commands, flags %v", len(root.children), root.flags)
	}
	return root
}

// use is one command line a document shows.
type use struct {
	file string
	line int
	args []string // the words after "outerloop"
	text string
}

// shellStop ends a command in a shell line.
var shellStop = map[string]bool{"|": true, "||": true, "&&": true, ";": true, ">": true, ">>": true, "2>&1": true, "&": true}

// commandsIn finds the outerloop commands of one shell line: the words after each
// `outerloop`, `./outerloop` or `go run ./cmd/outerloop`, up to a pipe, a list operator, a
// redirection or a comment.
func commandsIn(text string, shell bool) [][]string {
	words := strings.Fields(text)
	var out [][]string
	for i := 0; i < len(words); i++ {
		w := strings.TrimLeft(words[i], `"'$(`)
		start := -1
		switch {
		case i > 0 && words[i-1] == "-o":
			// `go build -o outerloop`: the output file, not a command
		case w == "outerloop" || w == "./outerloop":
			start = i + 1
		case w == "./cmd/outerloop" && i >= 2 && words[i-2] == "go" && words[i-1] == "run":
			start = i + 1
		}
		if start < 0 {
			continue
		}
		var args []string
		j := start
		for ; j < len(words); j++ {
			a := words[j]
			if shell && (shellStop[a] || strings.HasPrefix(a, "#")) {
				break
			}
			if a == `\|` || a == "|" {
				continue // alternatives in a synopsis: `--close \| --retry`
			}
			args = append(args, a)
		}
		out = append(out, args)
		i = j - 1
	}
	return out
}

// uses collects the outerloop commands a document shows: in shell code blocks, in inline code
// that starts with outerloop, and in the first cell of a "command" table.
func uses(d *doc) []use {
	var out []use
	shellLang := map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}
	for i := 0; i < len(d.fences); i++ {
		fl := d.fences[i]
		if !shellLang[fl.lang] {
			continue
		}
		text, line := fl.text, fl.line
		for strings.HasSuffix(strings.TrimSpace(text), `\`) && i+1 < len(d.fences) && d.fences[i+1].line == d.fences[i].line+1 {
			i++
			text = strings.TrimSuffix(strings.TrimSpace(text), `\`) + " " + d.fences[i].text
		}
		text = strings.TrimPrefix(strings.TrimSpace(text), "$ ")
		for _, args := range commandsIn(text, true) {
			out = append(out, use{file: d.path, line: line, args: args, text: strings.TrimSpace(text)})
		}
	}
	for _, sp := range d.inline {
		text := strings.Join(strings.Fields(sp.text), " ")
		switch {
		case sp.command:
			out = append(out, use{file: d.path, line: sp.line, args: synopsisArgs(text), text: text})
		case strings.HasPrefix(text, "outerloop ") || strings.HasPrefix(text, "./outerloop ") ||
			strings.HasPrefix(text, "go run ./cmd/outerloop "):
			for _, args := range commandsIn(text, true) {
				out = append(out, use{file: d.path, line: sp.line, args: synopsisArgs(strings.Join(args, " ")), text: text})
			}
		}
	}
	return out
}

// synopsisArgs turns a synopsis (`serve [--addr] [--concurrency N]`) into words: brackets and
// trailing ellipses are dropped, so `[--budget K=V]...` is `--budget`, `K=V`.
func synopsisArgs(text string) []string {
	var out []string
	for _, w := range strings.Fields(text) {
		w = strings.TrimRight(strings.Trim(w, "[]()"), ".…")
		w = strings.Trim(w, "[]()")
		if w == "" || w == `\|` || w == "|" {
			continue
		}
		out = append(out, w)
	}
	return out
}

// placeholder reports a word that stands for something elided (`templates …`).
func placeholder(w string) bool {
	return w == "…" || w == "..." || strings.HasPrefix(w, "<")
}

// check resolves a command line against the tree: the subcommand path must exist, and every
// long flag it shows must be one of the command it reached (local, inherited or global).
func (c *command) check(u use) []string {
	var problems []string
	cur := c
	descending := true
	for i := 0; i < len(u.args); i++ {
		a := u.args[i]
		if strings.HasPrefix(a, "--") {
			if a == "--" {
				break // what follows belongs to another program
			}
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			name = strings.TrimRight(name, ",.;:)")
			if name == "help" || (a == proc.GuardArg && cur == c) {
				continue // --help on every command; the guard's argument is read before the CLI
			}
			takesValue, ok := cur.flags[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("--%s is not a flag of `outerloop %s`", name, cur.path))
				continue
			}
			if takesValue && !hasValue && cur == c {
				i++ // a global flag's value before the subcommand
			}
			continue
		}
		if !descending || strings.HasPrefix(a, "-") {
			continue
		}
		if child, ok := cur.children[a]; ok {
			cur = child
			continue
		}
		if !cur.runnable && !placeholder(a) {
			problems = append(problems, fmt.Sprintf("`outerloop %s` has no subcommand %q", cur.path, a))
		}
		descending = false
	}
	return problems
}

// TestCommands checks every outerloop command the documents show against the real CLI.
func TestCommands(t *testing.T) {
	tree := cli(t)
	checked := 0
	for _, rel := range documents(t) {
		d := readDoc(t, rel)
		for _, u := range uses(d) {
			checked++
			for _, p := range tree.check(u) {
				t.Errorf("%s:%d: %s (in %q)", u.file, u.line, p, u.text)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d commands found: the parser is broken", checked)
	}
}

// TestSlug pins the anchor rule to GitHub's on headings these documents use.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Configuration reference (`outerloop.yaml`)": "configuration-reference-outerloopyaml",
		"After the pull request":                     "after-the-pull-request",
		"Two commands":                               "two-commands",
		"Pointing the agent loop at a real model":    "pointing-the-agent-loop-at-a-real-model",
		"The gate, in CI":                            "the-gate-in-ci",
		"`eval gate`: a [link](x.md) — and more":     "eval-gate-a-link--and-more",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
