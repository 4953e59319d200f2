package workitems_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// clockRuleAllowed are the places that may read the system time directly: the real Clock and
// test infrastructure that waits on real services. A directory ends in "/"; a pattern is
// matched with path.Match.
var clockRuleAllowed = map[string]string{
	"workitems/clock.go": "SystemClock is the one real implementation",
	"lib/fakeclock/":     "the fake clock itself",
	"lib/redistest/":     "test infrastructure: waits on a real Redis in real time",
	"lib/giteatest/":     "test infrastructure: waits on a real Gitea in real time",
	"proc/proctest/":     "test infrastructure: hostile processes in real time",
	"lib/testwait/":      "test infrastructure: a test's waits end before its binary's real deadline",
}

// clockReads are the time package's functions that read the system clock.
var clockReads = map[string]bool{"Now": true, "Since": true, "Until": true}

func clockRuleExempt(rel string) bool {
	match := func(p string) bool {
		if strings.HasSuffix(p, "/") {
			return strings.HasPrefix(rel, p)
		}
		ok, _ := path.Match(p, rel)
		return ok
	}
	for p := range clockRuleAllowed {
		if match(p) {
			return true
		}
	}
	return false
}

// TestTimeIsReadOnlyThroughTheClock keeps issue 26's rule: production code reads the time
// through an injected workitems.Clock, so a test can move it; time.Now, time.Since and
// time.Until appear only in SystemClock and the listed exceptions.
func TestTimeIsReadOnlyThroughTheClock(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if clockRuleExempt(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0) // with object resolution: see clockReadsIn
		if err != nil {
			return err
		}
		for _, pos := range clockReadsIn(f) {
			at := fset.Position(pos)
			bad = append(bad, rel+":"+strconv.Itoa(at.Line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("the system time is read outside workitems.SystemClock; take a workitems.Clock instead:\n  %s",
			strings.Join(bad, "\n  "))
	}
}

// clockReadsIn returns where f reads the system clock: a call of, or a reference to,
// time.Now, time.Since or time.Until under whatever name f imports "time".
func clockReadsIn(f *ast.File) []token.Pos {
	name, dot := "", false
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			name = "time"
		case imp.Name.Name == ".":
			dot = true
		case imp.Name.Name != "_":
			name = imp.Name.Name
		}
	}
	if name == "" && !dot {
		return nil
	}
	var out []token.Pos
	var visit func(ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			// Obj is nil for a package name; a local variable called "time" has one.
			if x, ok := n.X.(*ast.Ident); ok && x.Name == name && x.Obj == nil && clockReads[n.Sel.Name] {
				out = append(out, n.Pos())
			}
			ast.Inspect(n.X, visit) // not n.Sel: x.Now is not a dot-imported Now
			return false
		case *ast.Ident:
			if dot && n.Obj == nil && clockReads[n.Name] {
				out = append(out, n.Pos())
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return out
}

// TestClockReadsInResolvesTheImportName pins the detector: an aliased or dot import, a
// function value and a chained call are found; a local variable called time is not.
func TestClockReadsInResolvesTheImportName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"plain", "package p\nimport \"time\"\nvar a = time.Now().UTC()\nvar b = time.Since(a)\n", 2},
		{"alias", "package p\nimport tm \"time\"\nvar now = tm.Now\nvar d = tm.Until(tm.Time{})\n", 2},
		{"dot", "package p\nimport . \"time\"\nvar a = Now()\n", 1},
		{"shadowed", "package p\nimport \"time\"\ntype c struct{}\nfunc (c) Now() time.Duration { return 0 }\nfunc f() { time := c{}; _ = time.Now() }\n", 0},
		{"no import", "package p\nfunc Now() int { return 0 }\nvar a = Now()\n", 0},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(clockReadsIn(f)); got != tc.want {
			t.Errorf("%s: %d reads, want %d", tc.name, got, tc.want)
		}
	}
}
