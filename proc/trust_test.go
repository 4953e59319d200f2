package proc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/workitems/config"
)

// What a command writes in its workspace's .git is never a bind: host paths a command put in
// the workspace's alternates (absolute or relative) stay out of the next command's view,
// while the objects the worker's own git directory of the workspace borrows are shown.
func TestTheWorkspacesOwnAlternatesBindNothing(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte("canary-2b9d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mirrorObjects := filepath.Join(t.TempDir(), "m.git", "objects")
	ws := filepath.Join(t.TempDir(), "attempt-1")
	for _, d := range []string{mirrorObjects, filepath.Join(ws, ".git", "objects", "info"), filepath.Join(proc.WorkspaceGitDir(ws), "objects", "info")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rel, _ := filepath.Rel(filepath.Join(ws, ".git", "objects"), host)
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ws, ".git", "objects", "info", "alternates"), mirrorObjects+"\n"+host+"\n"+rel+"\n")
	write(filepath.Join(proc.WorkspaceGitDir(ws), "objects", "info", "alternates"), mirrorObjects+"\n")
	res := r.Run(context.Background(), proc.Spec{Dir: ws, Env: proc.BaseEnv(), Policy: proc.Policy{Workspace: ws},
		Command: "ls -d " + mirrorObjects + " && cat " + host + "/secret; ls " + proc.WorkspaceGitDir(ws) + " 2>&1; true"})
	if res.Err != nil || !strings.Contains(res.Tail, mirrorObjects) {
		t.Fatalf("the mirror's objects the worker's record names are not shown: %+v", res)
	}
	if strings.Contains(res.Tail, "canary-2b9d") {
		t.Fatalf("a host path from the workspace's alternates was bound: %q", res.Tail)
	}
	if !strings.Contains(res.Tail, "No such file") {
		t.Fatalf("the worker's git directory of the workspace is visible inside: %q", res.Tail)
	}
}

// A command that replaces a directory the worker makes inside the downloads directory with a
// link to a host path does not get the worker to create or bind anything there: the next
// command is refused, naming it, and the host path is untouched.
func TestALinkInTheDownloadsDirectoryIsRefusedNotFollowed(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	host := filepath.Join(t.TempDir(), "target")
	ws := filepath.Join(t.TempDir(), "attempt-1")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	policy := proc.PolicyFor(&config.Template{Repo: "https://git.example/a.git"}, ws, proc.NetworkRegistries)
	run := func(cmd string) proc.Result {
		return r.Run(context.Background(), proc.Spec{Command: cmd, Dir: ws, Env: proc.BaseEnv(), Timeout: time.Minute, Policy: policy, Key: "item/1"})
	}
	res := run(`rm -rf "$GOMODCACHE" && ln -s ` + host + ` "$GOMODCACHE" && echo planted`)
	if res.Err != nil || !strings.Contains(res.Tail, "planted") {
		t.Fatalf("the first command: %+v", res)
	}
	res = run("echo ran")
	if !errors.Is(res.Err, proc.ErrPathRefused) || !strings.Contains(res.Err.Error(), "gomod is a link") || strings.Contains(res.Tail, "ran") {
		t.Fatalf("a command started over a planted link: %+v", res)
	}
	if _, err := os.Lstat(host); !os.IsNotExist(err) {
		t.Fatalf("the worker created the link's target on the host: %v", err)
	}
}
