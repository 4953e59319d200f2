package delivery_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"outerloop/delivery"
	"outerloop/lib/hostilegit"
	"outerloop/proc"
	"outerloop/workitems"
)

// The delivery commit is made with the worker's own git directory of the workspace
// (Request.GitDir): the item's .git — its config, attributes drivers, hooks, signing program,
// alternates — runs nothing and decides nothing; the commit holds the work tree's files, the
// item's .git not among them, and the item's .git is left as the item left it.
func TestTheDeliveryCommitRunsNothingTheItemWroteIntoItsGit(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	gitDir := proc.WorkspaceGitDir(r.dir)
	if out, err := exec.Command("cp", "-r", r.dir+"/.git", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	markers, secrets := t.TempDir(), t.TempDir()
	hostilegit.Plant(t, r.dir, markers, secrets)
	r.write(map[string]string{"calc.go": strings.Replace(calc, "a - b", "a + b", 1)})
	itemHead := r.git("rev-parse", "HEAD")

	req := request(r, template(workitems.DeliverPatch), green, &events{})
	req.GitDir = gitDir
	res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if fired := hostilegit.Fired(t, markers); len(fired) > 0 {
		t.Fatalf("the delivery ran the item's programs on the host: %v", fired)
	}
	d := res.Delivery
	if d == nil || d.Outcome != workitems.DeliveryPatched || d.FileCount != 2 {
		t.Fatalf("delivery %+v, want calc.go and .gitattributes patched", d)
	}
	files := run(t, "git", "--git-dir="+gitDir, "ls-tree", "-r", "--name-only", d.Commit)
	if files != ".gitattributes\ncalc.go" {
		t.Fatalf("the commit holds %q", files)
	}
	if !strings.Contains(string(res.Patch), "a + b") || strings.Contains(string(res.Patch), markers) {
		t.Fatalf("patch:\n%s", res.Patch)
	}
	if got := run(t, "git", "--git-dir="+gitDir, "rev-parse", "HEAD"); got != d.Commit {
		t.Fatalf("the worker's HEAD %s, want the delivery commit %s", got, d.Commit)
	}
	if got := r.git("rev-parse", "HEAD"); got != itemHead {
		t.Fatalf("the item's own HEAD moved to %s", got)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}
