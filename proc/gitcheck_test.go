package proc_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gitOutsideRunner is a git started with os/exec directly instead of through proc.Git.
var gitOutsideRunner = regexp.MustCompile(`exec\.Command(Context)?\(\s*([^,()]+,\s*)?"git"`)

// The exceptions: proc itself, the benchmark (its raw git is the baseline it measures) and the
// Gitea test server (test infrastructure).
var gitExempt = []string{"proc/", "internal/benchmark/", "lib/giteatest/"}

// Every git the code runs goes through proc.Git, which owns the flags, the environment and the
// redaction of what git prints.
func TestEveryGitRunsThroughProc(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		for _, ex := range gitExempt {
			if strings.HasPrefix(rel, ex) {
				return nil
			}
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if gitOutsideRunner.MatchString(sc.Text()) {
				t.Errorf("%s:%d: git runs outside proc.Git: %s", rel, n, strings.TrimSpace(sc.Text()))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
