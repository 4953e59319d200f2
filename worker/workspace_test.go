package worker

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"outerloop/workitems"
)

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
		"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sourceRepo makes a git repository whose history is much larger than its checkout: each of
// commits rewrites every file with fresh (incompressible) content.
func sourceRepo(t testing.TB, files, commits int) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "init", "-q")
	rnd := rand.New(rand.NewPCG(uint64(files), uint64(commits)))
	for c := range commits {
		for f := range files {
			b := make([]byte, 3000)
			for i := range b {
				b[i] = byte(rnd.IntN(256))
			}
			write(t, dir, fmt.Sprintf("pkg%d/file%d.txt", f%5, f), fmt.Sprintf("commit %d file %d\n%s\n", c, f, base64.StdEncoding.EncodeToString(b)))
		}
		write(t, dir, ".gitignore", "build/\n")
		run(t, dir, "add", "-A")
		run(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d", c))
	}
	return dir
}

func TestAPlainDirectoryIsCopiedWithTheSameBaseCommitOnEveryHost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	plain := t.TempDir()
	write(t, plain, "a.txt", "hello")
	write(t, plain, "sub/b.txt", "b")
	outside := filepath.Join(t.TempDir(), "secret")
	write(t, filepath.Dir(outside), "secret", "x")
	if err := os.Symlink(outside, filepath.Join(plain, "link")); err != nil {
		t.Fatal(err)
	}
	hostA, hostB := &Workspaces{Root: t.TempDir()}, &Workspaces{Root: t.TempDir()}
	a, err := hostA.Prepare(ctx, "t@1", 1, plain)
	if err != nil {
		t.Fatal(err)
	}
	if a.Base.Kind != workitems.BaseCopy || a.Base.Commit == "" || a.Base.Tree == "" {
		t.Fatalf("base %+v", a.Base)
	}
	if b, _ := os.ReadFile(filepath.Join(a.Dir, "sub/b.txt")); string(b) != "b" {
		t.Fatal("file not copied")
	}
	if _, err := os.Lstat(filepath.Join(a.Dir, "link")); !os.IsNotExist(err) {
		t.Fatal("a symlink pointing outside was copied")
	}
	// Another host (another work dir, later) copies the same files into the same commit.
	b, err := hostB.Recreate(ctx, "t@1", 1, plain, a.Base)
	if err != nil {
		t.Fatal(err)
	}
	if b.Base.Commit != a.Base.Commit || b.Dir == a.Dir {
		t.Fatalf("the base commit must not depend on the host or time: %s vs %s", b.Base.Commit, a.Base.Commit)
	}
	// Once the directory changed, the base cannot be made again: said so, nothing left behind.
	write(t, plain, "a.txt", "changed upstream")
	_, err = (&Workspaces{Root: t.TempDir()}).Recreate(ctx, "t@1", 1, plain, a.Base)
	if !errors.Is(err, ErrBaseUnavailable) {
		t.Fatalf("changed source: %v", err)
	}
	// No repo at all: an empty, equally deterministic base.
	e1, err := hostA.Prepare(ctx, "t@1", 2, "")
	if err != nil {
		t.Fatal(err)
	}
	e2, err := hostB.Recreate(ctx, "t@1", 2, "", e1.Base)
	if err != nil || e1.Base.Kind != workitems.BaseEmpty || e2.Base.Commit != e1.Base.Commit {
		t.Fatalf("empty base: %v %+v %+v", err, e1.Base, e2.Base)
	}
	if _, err := hostA.Prepare(ctx, "t@1", 3, filepath.Join(plain, "missing")); err == nil {
		t.Fatal("a missing repo path must fail")
	}
}

// looseObjects lists the object ids stored in a repository's own .git/objects (not through
// alternates), and how many pack files it has.
func looseObjects(t *testing.T, gitDir string) (ids []string, packs int) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(gitDir, "objects"))
	for _, e := range ents {
		if len(e.Name()) == 2 {
			sub, _ := os.ReadDir(filepath.Join(gitDir, "objects", e.Name()))
			for _, s := range sub {
				ids = append(ids, e.Name()+s.Name())
			}
		}
	}
	p, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.pack"))
	return ids, len(p)
}

func TestAWorkspaceFromTheMirrorHoldsOnlyItsOwnObjects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 30, 15)
	write(t, src, "uncommitted.txt", "not part of any commit")
	w := &Workspaces{Root: t.TempDir(), Deployment: "ol:"}
	ws, err := w.Prepare(ctx, "deps@20260101T000000Z", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Base.Kind != workitems.BaseGit || ws.Base.Commit != run(t, src, "rev-parse", "HEAD") || ws.Base.Branch != "main" || !ws.MirrorCreated {
		t.Fatalf("base %+v created=%v", ws.Base, ws.MirrorCreated)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, "uncommitted.txt")); !os.IsNotExist(err) {
		t.Fatal("a git source is checked out at a commit: uncommitted files stay behind")
	}
	if got := run(t, ws.Dir, "rev-parse", "HEAD"); got != ws.Base.Commit {
		t.Fatalf("HEAD %s, base %s", got, ws.Base.Commit)
	}
	mirror := w.mirrorDir(ws.Base.Mirror)
	alt, err := os.ReadFile(filepath.Join(ws.Dir, ".git", "objects", "info", "alternates"))
	if err != nil || strings.TrimSpace(string(alt)) != filepath.Join(mirror, "objects") {
		t.Fatalf("alternates %q (%v), want the mirror's objects", alt, err)
	}
	ids, packs := looseObjects(t, filepath.Join(ws.Dir, ".git"))
	if len(ids) != 0 || packs != 0 {
		t.Fatalf("a fresh workspace must borrow every object: %d loose, %d packs", len(ids), packs)
	}
	wsGit, mirrorBytes := diskUsage(filepath.Join(ws.Dir, ".git")), diskUsage(mirror)
	if wsGit*5 > mirrorBytes {
		t.Fatalf("workspace .git %d bytes against the mirror's %d: not O(checkout)", wsGit, mirrorBytes)
	}
	if got := run(t, mirror, "rev-parse", w.baseRef("deps@20260101T000000Z", 1)); got != ws.Base.Commit {
		t.Fatalf("base ref %s", got)
	}
	// Fetches after the first must not prune the base refs (they are outside the refspecs).
	if _, err := w.Prepare(ctx, "deps@20260101T000000Z", 2, src); err != nil {
		t.Fatal(err)
	}
	if got := run(t, mirror, "rev-parse", w.baseRef("deps@20260101T000000Z", 1)); got != ws.Base.Commit {
		t.Fatalf("base ref after a fetch %s", got)
	}

	// What the attempt makes is its own: every object the workspace then stores is new.
	write(t, ws.Dir, "pkg0/new.txt", "new file")
	write(t, ws.Dir, "pkg1/file1.txt", "rewritten")
	if _, err := ws.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	// ... and lands in the worker's own git directory, not in the tree's .git (the item's).
	if ids, packs := looseObjects(t, filepath.Join(ws.Dir, ".git")); len(ids) != 0 || packs != 0 {
		t.Fatalf("the snapshot wrote %d objects, %d packs into the workspace's own .git", len(ids), packs)
	}
	if own := diskUsage(ws.GitDir()); own*5 > mirrorBytes {
		t.Fatalf("the worker's git directory %d bytes against the mirror's %d: not O(checkout)", own, mirrorBytes)
	}
	ids, packs = looseObjects(t, ws.GitDir())
	if len(ids) == 0 || len(ids) > 6 || packs != 0 {
		t.Fatalf("after two changed files the workspace holds %d objects, %d packs", len(ids), packs)
	}
	for _, id := range ids {
		if exec.Command("git", "-C", mirror, "cat-file", "-e", id).Run() == nil {
			t.Fatalf("object %s of the mirror was copied into the workspace", id)
		}
	}
}

func TestTheMirrorIsFetchedBeforeANewAttemptAndNotOnResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 3, 2)
	w := &Workspaces{Root: t.TempDir()}
	first, err := w.Prepare(ctx, "it@1", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	mirror := w.mirrorDir(first.Base.Mirror)
	write(t, src, "later.txt", "upstream moved on")
	run(t, src, "add", "-A")
	run(t, src, "commit", "-q", "-m", "later")
	moved := run(t, src, "rev-parse", "HEAD")

	// A resume recreates the recorded base and leaves the mirror where it was.
	again, err := w.Recreate(ctx, "it@1", 1, src, first.Base)
	if err != nil {
		t.Fatal(err)
	}
	if again.MirrorFetched || again.MirrorCreated || again.Base.Commit != first.Base.Commit {
		t.Fatalf("resume: fetched=%v created=%v base %s", again.MirrorFetched, again.MirrorCreated, again.Base.Commit)
	}
	if got := run(t, mirror, "rev-parse", "refs/heads/main"); got != first.Base.Commit {
		t.Fatalf("a resume moved the mirror to %s", got)
	}
	if _, err := os.Stat(filepath.Join(again.Dir, "later.txt")); !os.IsNotExist(err) {
		t.Fatal("the resumed workspace has a file from after its base")
	}
	// A new attempt fetches first and starts from the moved branch.
	next, err := w.Prepare(ctx, "it@1", 2, src)
	if err != nil {
		t.Fatal(err)
	}
	if !next.MirrorFetched || next.MirrorCreated || next.Base.Commit != moved {
		t.Fatalf("new attempt: fetched=%v created=%v base %s, want %s", next.MirrorFetched, next.MirrorCreated, next.Base.Commit, moved)
	}
	if _, err := os.Stat(filepath.Join(next.Dir, "later.txt")); err != nil {
		t.Fatal("the new attempt lacks the new commit's file")
	}
}

func TestARecordedBaseIsFetchedOnAnotherHostUntilTheSourceLosesIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 3, 2)
	a, err := (&Workspaces{Root: t.TempDir()}).Prepare(ctx, "it@1", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	// Host B has no mirror yet: it makes one and finds the base in it.
	b, err := (&Workspaces{Root: t.TempDir()}).Recreate(ctx, "it@1", 1, src, a.Base)
	if err != nil || b.Base.Commit != a.Base.Commit || !b.MirrorCreated {
		t.Fatalf("host B: %v %+v", err, b)
	}
	// The source rewrites its history and forgets the base: host C cannot make it.
	run(t, src, "checkout", "-q", "--orphan", "rewritten")
	run(t, src, "commit", "-q", "-m", "new root")
	run(t, src, "branch", "-D", "main")
	run(t, src, "branch", "-m", "main")
	run(t, src, "reflog", "expire", "--expire=now", "--all")
	run(t, src, "gc", "-q", "--prune=now")
	root := t.TempDir()
	_, err = (&Workspaces{Root: root}).Recreate(ctx, "it@1", 1, src, a.Base)
	if !errors.Is(err, ErrBaseUnavailable) || !strings.Contains(err.Error(), a.Base.Commit[:12]) {
		t.Fatalf("lost base: %v", err)
	}
	if _, err := os.Stat((&Workspaces{Root: root}).Path("it@1", 1)); !os.IsNotExist(err) {
		t.Fatal("a failed recreate left a workspace")
	}
}

func TestConcurrentPreparationsShareOneMirror(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 10, 3)
	root := t.TempDir()
	type result struct {
		Created bool   `json:"created"`
		Commit  string `json:"commit"`
		Dir     string `json:"dir"`
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	// Two other processes on the same host...
	for i := range 2 {
		wg.Go(func() {
			spec, _ := json.Marshal([]string{root, src, "proc@1", fmt.Sprint(i + 1)})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), prepareChildEnv+"="+string(spec))
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				errs <- fmt.Errorf("child %d: %v: %s", i, err, stderr.String())
				return
			}
			var r result
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				errs <- fmt.Errorf("child %d output %q: %v", i, out.String(), err)
				return
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
	}
	// ...and goroutines of this one, sharing one Workspaces.
	w := &Workspaces{Root: root, Deployment: "test"}
	for i := range 6 {
		wg.Go(func() {
			ws, err := w.Prepare(ctx, "goroutine@1", i+1, src)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			results = append(results, result{Created: ws.MirrorCreated, Commit: ws.Base.Commit, Dir: ws.Dir})
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	created := 0
	head := run(t, src, "rev-parse", "HEAD")
	for _, r := range results {
		if r.Created {
			created++
		}
		if r.Commit != head || run(t, r.Dir, "rev-parse", "HEAD") != head || run(t, r.Dir, "status", "--porcelain") != "" {
			t.Errorf("workspace %s is not a clean checkout of %s", r.Dir, head)
		}
	}
	if len(results) != 8 || created != 1 {
		t.Fatalf("%d preparations, %d created the mirror (want 8 and exactly 1)", len(results), created)
	}
	mirrors, _ := filepath.Glob(filepath.Join(root, "mirrors", "*.git"))
	refs := run(t, mirrors[0], "for-each-ref", "--format=%(refname)", "refs/outerloop/base/")
	if len(mirrors) != 1 || len(strings.Fields(refs)) != 8 {
		t.Fatalf("mirrors %v, base refs:\n%s", mirrors, refs)
	}
}

func TestASnapshotRecreatesTheTreeOnAnotherHost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 4, 2)
	write(t, src, "build/tracked-but-ignored.txt", "forced in")
	run(t, src, "add", "-f", "build/tracked-but-ignored.txt")
	run(t, src, "commit", "-q", "-m", "a tracked file .gitignore matches")
	a, err := (&Workspaces{Root: t.TempDir()}).Prepare(ctx, "it@1", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	if tree, err := a.Tree(ctx); err != nil || tree != a.Base.Tree {
		t.Fatalf("an untouched workspace's tree must be its base's: %s vs %s (%v)", tree, a.Base.Tree, err)
	}
	// Every kind of change: edit, add in a new directory, delete, binary, mode, an ignored file.
	write(t, a.Dir, "pkg0/file0.txt", "edited\n")
	write(t, a.Dir, "deep/new/dir/new.go", "package dir\n")
	if err := os.Remove(filepath.Join(a.Dir, "pkg1/file1.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, "blob.bin"), []byte{0, 1, 2, 255, 0, 13, 10}, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, a.Dir, "run.sh", "#!/bin/sh\necho hi\n")
	if err := os.Chmod(filepath.Join(a.Dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, a.Dir, "build/output.o", "ignored build output")
	loopIndex := run(t, a.Dir, "status", "--porcelain")
	tree, err := a.Tree(ctx)
	if err != nil || tree == a.Base.Tree {
		t.Fatalf("tree %s %v", tree, err)
	}
	if run(t, a.Dir, "status", "--porcelain") != loopIndex || run(t, a.Dir, "rev-parse", "HEAD") != a.Base.Commit {
		t.Fatal("taking a snapshot changed the loop's own index or HEAD")
	}
	patch, n, tooLarge, err := a.Diff(ctx, a.Base.Tree, tree, workitems.DefaultSnapshotLimit)
	if err != nil || tooLarge || n != len(patch) || !bytes.Contains(patch, []byte("GIT binary patch")) {
		t.Fatalf("diff: %v tooLarge=%v %d bytes", err, tooLarge, n)
	}
	if bytes.Contains(patch, []byte("output.o")) || bytes.Contains(patch, []byte("tracked-but-ignored")) {
		t.Fatal("the diff has an ignored file, or lost a tracked one .gitignore matches")
	}
	b, err := (&Workspaces{Root: t.TempDir()}).Recreate(ctx, "it@1", 1, src, a.Base)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, patch); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Tree(ctx); err != nil || got != tree {
		t.Fatalf("restored tree %s (%v), checkpointed %s", got, err, tree)
	}
	if fi, err := os.Stat(filepath.Join(b.Dir, "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatal("the executable bit did not travel")
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "pkg1/file1.txt")); !os.IsNotExist(err) {
		t.Fatal("a deleted file came back")
	}
	// Past the limit only the size is kept.
	_, n2, tooLarge, err := a.Diff(ctx, a.Base.Tree, tree, 100)
	if err != nil || !tooLarge || n2 != n {
		t.Fatalf("limit: %v tooLarge=%v %d bytes, want %d", err, tooLarge, n2, n)
	}
}

func TestRemoveDeletesTheWorkspaceItsFilesAndItsBaseRef(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 3, 2)
	w := &Workspaces{Root: t.TempDir()}
	ws, err := w.Prepare(ctx, "it@1", 1, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Attempts("it@1"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("attempts %v", got)
	}
	freed, err := w.Remove(ctx, "it@1", 1)
	if err != nil || freed <= 0 {
		t.Fatalf("remove: %d %v", freed, err)
	}
	for _, p := range []string{ws.Dir, ws.Dir + ".json", ws.Dir + ".index", filepath.Dir(ws.Dir)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
	if refs := run(t, w.mirrorDir(ws.Base.Mirror), "for-each-ref", "refs/outerloop/"); refs != "" {
		t.Fatalf("base ref left: %s", refs)
	}
	if _, err := w.Remove(ctx, "it@1", 1); err != nil {
		t.Fatalf("removing nothing: %v", err)
	}
}

func TestMirrorNamesAreStableAndFreeOfCredentials(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, wantPrefix string }{
		{"https://github.com/acme/payments.git", "github.com_acme_payments-"},
		{"https://x-access-token:s3cret@github.com/acme/payments.git", "github.com_acme_payments-"},
		{"git@github.com:acme/payments.git", "github.com_acme_payments-"},
		{"/srv/repos/payments", "repos_payments-"},
	}
	for _, c := range cases {
		name := MirrorName(c.src)
		if !strings.HasPrefix(name, c.wantPrefix) || strings.Contains(name, "s3cret") || name != MirrorName(c.src) {
			t.Errorf("MirrorName(%q) = %q", c.src, name)
		}
	}
	if MirrorName(cases[0].src) != MirrorName(cases[1].src) {
		t.Error("credentials must not change the mirror")
	}
	if MirrorName("https://github.com/acme/payments.git") == MirrorName("https://github.com/other/payments.git") {
		t.Error("different repos share a mirror")
	}
}

func TestAFailedMirrorNamesTheRepoWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"http://user:s3cr3t-pw@127.0.0.1:1/acme/x.git", "http://s3cr3t-tok@127.0.0.1:1/acme/x.git"} {
		_, err := (&Workspaces{Root: t.TempDir()}).Prepare(t.Context(), "it@1", 1, src)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "127.0.0.1:1/acme/x.git") {
			t.Fatalf("error for %s: %v", src, err)
		}
	}
}

// TestANewAttemptStartsAtItsItemsRef: a branch starts at its tip (and is the base branch), a
// tag and a commit (full or abbreviated, one no branch reaches included) at that commit; a
// ref the repository does not have fails naming it, and leaves no workspace.
func TestANewAttemptStartsAtItsItemsRef(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := sourceRepo(t, 2, 3)
	first := run(t, src, "rev-list", "--max-parents=0", "HEAD")
	second := run(t, src, "rev-parse", "HEAD~1")
	run(t, src, "tag", "v1", second)
	run(t, src, "branch", "release", first)
	// A commit no branch or tag reaches (a force-pushed-away fix, say).
	run(t, src, "checkout", "-q", "-b", "gone")
	write(t, src, "gone.txt", "x")
	run(t, src, "add", "-A")
	run(t, src, "commit", "-q", "-m", "gone")
	orphan := run(t, src, "rev-parse", "HEAD")
	run(t, src, "checkout", "-q", "main")
	w := &Workspaces{Root: t.TempDir()}
	if _, err := w.Prepare(ctx, "it@0", 1, src); err != nil { // the mirror exists before gone is deleted
		t.Fatal(err)
	}
	run(t, src, "branch", "-D", "gone")

	for i, c := range []struct{ ref, commit, branch string }{
		{"release", first, "release"},
		{"v1", second, "main"},
		{second, second, "main"},
		{first[:10], first, "main"},
		{orphan, orphan, "main"},
	} {
		ws, err := w.PrepareAt(ctx, fmt.Sprintf("it@%d", i+1), 1, src, c.ref)
		if err != nil {
			t.Fatalf("ref %s: %v", c.ref, err)
		}
		if ws.Base.Commit != c.commit || ws.Base.Branch != c.branch {
			t.Errorf("ref %s: base %s on %s, want %s on %s", c.ref, ws.Base.Commit, ws.Base.Branch, c.commit, c.branch)
		}
		if head := run(t, ws.Dir, "rev-parse", "HEAD"); head != c.commit {
			t.Errorf("ref %s: checkout at %s, want %s", c.ref, head, c.commit)
		}
	}
	_, err := w.PrepareAt(ctx, "it@9", 1, src, "no-such-branch")
	if err == nil || !strings.Contains(err.Error(), `ref "no-such-branch" is not a branch, tag or commit of`) ||
		workitems.ClassOf(err) != workitems.ClassNotFound {
		t.Fatalf("unknown ref: %v (class %s)", err, workitems.ClassOf(err))
	}
	if _, err := os.Stat(w.Path("it@9", 1)); !os.IsNotExist(err) {
		t.Error("a failed preparation left a workspace")
	}
	plain := t.TempDir()
	write(t, plain, "a.txt", "a")
	if _, err := w.PrepareAt(ctx, "it@10", 1, plain, "main"); err == nil || !strings.Contains(err.Error(), "is not a git repository") {
		t.Errorf("a ref of a plain directory: %v", err)
	}
}
