// Package hostilegit plants, for tests, what a hostile item can write into its workspace's
// .git to make a git command that reads it run code: every configuration key git runs a
// program from (filters, diff drivers, fsmonitor, hooks, signing, ssh, credential helpers,
// the pager), an include of a config file the item wrote, the attributes that select the
// drivers, and host paths in its alternates. Each program only creates a marker file in a
// directory the test owns on the host (out of every sandbox's sight), so a marker there
// proves that a command ran on the host.
package hostilegit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Plant writes the hostile settings into ws/.git/config (and an included file), the
// attributes into ws/.gitattributes, and hostDirs (absolute and, relative to the objects
// directory, the same again) into ws/.git/objects/info/alternates. markers is where the
// programs leave their marker files.
func Plant(t testing.TB, ws, markers string, hostDirs ...string) {
	t.Helper()
	// Double-quoted: in a git config file an unquoted ';' starts a comment.
	run := func(name string) string {
		return fmt.Sprintf(`"sh -c 'touch %s; cat'"`, filepath.Join(markers, name))
	}
	cfg := fmt.Sprintf(`
[filter "x"]
	clean = %s
	smudge = %s
	process = %s
	required = false
[diff "x"]
	textconv = %s
	command = %s
[diff]
	external = %s
[merge "x"]
	driver = %s
[core]
	fsmonitor = %s
	hooksPath = %s
	sshCommand = %s
	pager = %s
	askPass = %s
[credential]
	helper = %s
[gpg]
	program = %s
[commit]
	gpgsign = true
[include]
	path = %s
`, run("filter-clean"), run("filter-smudge"), run("filter-process"), run("diff-textconv"), run("diff-command"),
		run("diff-external"), run("merge-driver"), run("core-fsmonitor"), filepath.Join(ws, ".git", "evil-hooks"),
		run("core-sshcommand"), run("core-pager"), run("core-askpass"), `"!sh -c 'touch `+filepath.Join(markers, "credential-helper")+`'"`, run("gpg-program"),
		filepath.Join(ws, ".git", "evil.config"))
	appendFile(t, filepath.Join(ws, ".git", "config"), cfg)
	write(t, filepath.Join(ws, ".git", "evil.config"), fmt.Sprintf("[core]\n\tfsmonitor = %s\n[url \"file:///nonexistent/\"]\n\tinsteadOf = http\n", run("include-fsmonitor")))
	hooks := filepath.Join(ws, ".git", "evil-hooks")
	for _, h := range []string{"pre-commit", "post-commit", "pre-push", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc"} {
		write(t, filepath.Join(hooks, h), "#!/bin/sh\ntouch "+filepath.Join(markers, "hook-"+h)+"\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	appendFile(t, filepath.Join(ws, ".gitattributes"), "* filter=x diff=x merge=x\n")
	var alt []string
	for _, d := range hostDirs {
		rel, err := filepath.Rel(filepath.Join(ws, ".git", "objects"), d)
		if err != nil {
			t.Fatal(err)
		}
		alt = append(alt, d, rel)
	}
	if len(alt) > 0 {
		appendFile(t, filepath.Join(ws, ".git", "objects", "info", "alternates"), strings.Join(alt, "\n")+"\n")
	}
}

// Fired lists the markers that exist: each names a setting whose program ran on the host.
func Fired(t testing.TB, markers string) []string {
	t.Helper()
	ents, err := os.ReadDir(markers)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// ReplaceGitDir replaces ws/.git with a link to target (link true) or a gitdir file naming
// it: git run in the tree would read that repository instead, wherever it is.
func ReplaceGitDir(t testing.TB, ws, target string, link bool) {
	t.Helper()
	g := filepath.Join(ws, ".git")
	if err := os.RemoveAll(g); err != nil {
		t.Fatal(err)
	}
	if link {
		if err := os.Symlink(target, g); err != nil {
			t.Fatal(err)
		}
		return
	}
	write(t, g, "gitdir: "+target+"\n")
}

func appendFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
