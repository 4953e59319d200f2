package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/lib/hostilegit"
)

// Everything in a workspace, its .git included, is the item's data. A hostile step writes
// every git setting that runs a program (filters, diff drivers, fsmonitor, hooks, signing,
// credential helpers, an include), the attributes that select them and host paths in its
// alternates: the worker's own git on the workspace (snapshot, diff, restore) runs none of
// them and reads none of those paths, and what the snapshot holds is the work tree.
func TestTheWorkersGitRunsNothingTheItemWroteIntoItsGit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 3, 2)
	w := &Workspaces{Root: t.TempDir()}
	ws, err := w.Prepare(ctx, "hostile@1", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	markers, secrets := t.TempDir(), t.TempDir()
	write(t, secrets, "secret.txt", "canary-secret\n")
	hostilegit.Plant(t, ws.Dir, markers, secrets)
	write(t, ws.Dir, "pkg0/changed.txt", "changed by the item\n")

	// The control: git run in the tree, as the worker used to, runs the item's programs.
	control := exec.Command("git", "-C", ws.Dir, "add", "--all")
	control.Env = append(os.Environ(), "GIT_INDEX_FILE="+filepath.Join(t.TempDir(), "index"))
	_ = control.Run()
	if fired := strings.Join(hostilegit.Fired(t, markers), " "); !strings.Contains(fired, "filter-") || !strings.Contains(fired, "fsmonitor") {
		t.Fatalf("the planted settings do not run in the tree's own git (fired: %q): the test proves nothing", fired)
	}
	for _, m := range hostilegit.Fired(t, markers) {
		os.Remove(filepath.Join(markers, m))
	}

	tree, err := ws.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch, _, _, err := ws.Diff(ctx, ws.Base.Tree, tree, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), "changed by the item") || !strings.Contains(string(patch), ".gitattributes") {
		t.Fatalf("the snapshot lacks the work tree's change:\n%s", patch)
	}
	if strings.Contains(string(patch), "canary-secret") || strings.Contains(string(patch), "evil-hooks") || strings.Contains(string(patch), "fsmonitor") {
		t.Fatalf("the snapshot holds the .git's or a host path's contents:\n%s", patch)
	}
	// A restore on a fresh workspace applies the same diff (checkout and apply in the tree).
	again, err := w.Recreate(ctx, "hostile@1", 1, src, ws.Base)
	if err != nil {
		t.Fatal(err)
	}
	hostilegit.Plant(t, again.Dir, markers, secrets)
	if err := os.Remove(filepath.Join(again.Dir, ".gitattributes")); err != nil {
		t.Fatal(err)
	}
	if err := again.Apply(ctx, patch); err != nil {
		t.Fatal(err)
	}
	if got, err := again.Tree(ctx); err != nil || got != tree {
		t.Fatalf("restored tree %s (%v), want %s", got, err, tree)
	}
	if fired := hostilegit.Fired(t, markers); len(fired) > 0 {
		t.Fatalf("the worker's git ran the item's programs on the host: %v", fired)
	}
}

// A .git replaced by a link to, or a gitdir file naming, a repository elsewhere on the host
// changes nothing the worker's git sees: it reads its own git directory, and the tree's .git
// is never part of a snapshot.
func TestAReplacedDotGitIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, link := range []bool{true, false} {
		name := map[bool]string{true: "a link", false: "a gitdir file"}[link]
		t.Run("when it is "+name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			src := sourceRepo(t, 2, 1)
			w := &Workspaces{Root: t.TempDir()}
			ws, err := w.Prepare(ctx, "hostile@2", 1, src)
			if err != nil {
				t.Fatal(err)
			}
			other := sourceRepo(t, 4, 3) // another repository on the host
			hostilegit.ReplaceGitDir(t, ws.Dir, filepath.Join(other, ".git"), link)
			write(t, ws.Dir, "new.txt", "new\n")
			tree, err := ws.Tree(ctx)
			if err != nil {
				t.Fatal(err)
			}
			patch, _, _, err := ws.Diff(ctx, ws.Base.Tree, tree, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if files := strings.Count(string(patch), "diff --git"); files != 1 || !strings.Contains(string(patch), "b/new.txt") {
				t.Fatalf("the snapshot is not the work tree's one new file:\n%s", patch)
			}
			if _, err := w.Open("hostile@2", 1); err != nil {
				t.Fatalf("the workspace is its own git directory's, whatever its .git is: %v", err)
			}
		})
	}
}
