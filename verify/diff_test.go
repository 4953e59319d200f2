package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// gitRepo makes a repository with one commit and returns its directory and the commit.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com",
			"-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	writeFiles(t, dir, files)
	run("add", "-A")
	run("commit", "-q", "-m", "base")
	return dir, run("rev-parse", "HEAD")
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollectDiff(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	base := map[string]string{"go.mod": "module example.com/m\n", "internal/calc/calc.go": "package calc\n\nfunc A() int { return 1 }\n",
		"README.md": "hello\n", ".gitignore": "build/\n"}
	t.Run("tracked and untracked changes are measured against the base", func(t *testing.T) {
		t.Parallel()
		dir, sha := gitRepo(t, base)
		writeFiles(t, dir, map[string]string{
			"internal/calc/calc.go": "package calc\n\nfunc A() int { return 2 }\n\nfunc B() int { return 3 }\n",
			"internal/calc/new.go":  "package calc\n",
			"build/out.bin":         "ignored by .gitignore\n",
		})
		d, err := CollectDiff(context.Background(), dir, "", sha, &config.DiffCheck{AllowedPaths: []string{"**/*.go"}})
		if err != nil {
			t.Fatal(err)
		}
		paths := []string{}
		for _, f := range d.Files {
			paths = append(paths, f.Path)
		}
		slices.Sort(paths)
		if !slices.Equal(paths, []string{"internal/calc/calc.go", "internal/calc/new.go"}) {
			t.Fatalf("files %q", paths)
		}
		if d.Added != 4 || d.Deleted != 1 || len(d.Violations) != 0 || len(d.Secrets) != 0 {
			t.Fatalf("diff %+v", d)
		}
		if !d.Touches(&TestCase{Suite: "example.com/m/internal/calc"}) || d.Touches(&TestCase{Suite: "example.com/m/other"}) {
			t.Fatal("package mapping is wrong")
		}
	})
	t.Run("paths outside the allowed globs and limits are violations", func(t *testing.T) {
		t.Parallel()
		dir, sha := gitRepo(t, base)
		writeFiles(t, dir, map[string]string{"README.md": "hello\nworld\nagain\n", "internal/calc/calc.go": "package calc\n"})
		d, err := CollectDiff(context.Background(), dir, "", sha, &config.DiffCheck{AllowedPaths: []string{"internal/**"}, MaxFiles: 1, MaxLines: 2})
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(d.Violations, "\n")
		for _, want := range []string{"outside allowed paths", "README.md", "max_files is 1", "max_lines is 2"} {
			if !strings.Contains(joined, want) {
				t.Errorf("violations %q lack %q", d.Violations, want)
			}
		}
	})
	t.Run("secret-looking additions are flagged without revealing them", func(t *testing.T) {
		t.Parallel()
		dir, sha := gitRepo(t, base)
		key := "AKIA" + "ABCDEFGHIJKLMNOP"
		writeFiles(t, dir, map[string]string{
			"internal/calc/calc.go": "package calc\n\nconst k = \"" + key + "\"\n",
			"deploy/id_rsa":         "-----BEGIN RSA " + "PRIVATE KEY-----\nabc\n",
			"config.env":            "TOKEN=ghp_" + strings.Repeat("a1B2", 9) + "\n",
		})
		d, err := CollectDiff(context.Background(), dir, "", sha, nil)
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(d.Secrets, "\n")
		for _, want := range []string{"internal/calc/calc.go:3: AWS access key id", "deploy/id_rsa:1: private key", "config.env:1: GitHub token"} {
			if !strings.Contains(joined, want) {
				t.Errorf("secrets %q lack %q", d.Secrets, want)
			}
		}
		if strings.Contains(joined, key) {
			t.Fatal("the secret itself was reported")
		}
	})
	t.Run("no base commit is an error, not an empty diff", func(t *testing.T) {
		t.Parallel()
		if _, err := CollectDiff(context.Background(), t.TempDir(), "", "", nil); err == nil {
			t.Fatal("want an error")
		}
	})
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true},
		{"**/*.go", "x/y/a.md", false},
		{"internal/**", "internal/a/b.txt", true},
		{"internal/**", "cmd/a.go", false},
		{"*.go", "x/a.go", false},
		{"docs/*.md", "docs/a.md", true},
		{"docs/*.md", "docs/sub/a.md", false},
		{"a/**/z.txt", "a/z.txt", true},
		{"a/**/z.txt", "a/b/c/z.txt", true},
	}
	for _, c := range cases {
		t.Run(c.glob+" against "+c.path, func(t *testing.T) {
			t.Parallel()
			if got := globMatch(c.glob, c.path); got != c.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestVerifyWithDiffLimits(t *testing.T) {
	t.Parallel()
	pass, _ := filepath.Abs("testdata/gojson/pass.json")
	t.Run("green tests with a diff out of scope escalate", func(t *testing.T) {
		t.Parallel()
		ws, sha := gitRepo(t, map[string]string{"a.go": "package a\n"})
		writeFiles(t, ws, map[string]string{"a.go": "package a\n\nvar X = 1\n", "secrets.txt": "nothing\n"})
		tmpl := template("cat '" + pass + "'")
		tmpl.DoneCheck.Diff = &config.DiffCheck{AllowedPaths: []string{"**/*.go"}}
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}),
			Attempt: 1, Exit: completed(), Workspace: ws, BaseCommit: sha})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != "diff_out_of_scope" || !strings.Contains(res.Decision.Reasons[0], "secrets.txt") {
			t.Fatalf("got %s %q", res.Decision.Rule, res.Decision.Reasons)
		}
	})
	t.Run("diff limits without a base commit cannot be met", func(t *testing.T) {
		t.Parallel()
		tmpl := template("cat '" + pass + "'")
		tmpl.DoneCheck.Diff = &config.DiffCheck{MaxFiles: 3}
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}),
			Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome == workitems.OutcomeClose || res.Decision.Rule != "diff_out_of_scope" {
			t.Fatalf("got %s/%s", res.Decision.Outcome, res.Decision.Rule)
		}
	})
}
