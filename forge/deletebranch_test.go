package forge

import (
	"errors"
	"os"
	"strings"
	"testing"

	"outerloop/workitems"
)

func TestDeleteBranchDeletesOnlyWhereTheBranchWasRead(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "delete")
	auth := mustAuth(t, e)
	req := func(branch, expected string) PushRequest {
		return PushRequest{Forge: "tea", Dir: e.dir, URL: e.repo.CloneURL, Branch: branch, Expected: expected, Auth: auth}
	}
	remote := func(branch string) string {
		t.Helper()
		sha, err := RemoteBranch(bg, req(branch, ""))
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}

	t.Run("ABranchWhereItWasReadIsDeleted", func(t *testing.T) {
		sha := e.branchCommit(t, "outerloop/done", "done.txt", "done\n")
		if err := e.push(t, sha, "outerloop/done", ""); err != nil {
			t.Fatal(err)
		}
		gitBin, argvLog := argvRecorder(t)
		r := req("outerloop/done", sha)
		r.Git = gitBin
		if err := DeleteBranch(bg, r); err != nil {
			t.Fatal(err)
		}
		if got := remote("outerloop/done"); got != "" {
			t.Fatalf("the branch is still at %s", got)
		}
		argv, _ := os.ReadFile(argvLog)
		noSecret(t, "git's argv", string(argv), e.secrets()...)
		if want := strings.Join(DeleteArgs(r), " "); !strings.Contains(string(argv), want) {
			t.Fatalf("exec'd argv\n%s\nwant a line\n%s", argv, want)
		}
		if want := "--force-with-lease=refs/heads/outerloop/done:" + sha + " " + e.repo.CloneURL + " :refs/heads/outerloop/done"; !strings.Contains(string(argv), want) {
			t.Fatalf("exec'd argv\n%s\nwant %s", argv, want)
		}

		// Gone already: nothing to do.
		if err := DeleteBranch(bg, r); err != nil {
			t.Fatalf("deleting a deleted branch: %v", err)
		}
	})

	t.Run("WithoutARepositoryATemporaryOneIsUsed", func(t *testing.T) {
		sha := e.branchCommit(t, "outerloop/no-dir", "nodir.txt", "x\n")
		if err := e.push(t, sha, "outerloop/no-dir", ""); err != nil {
			t.Fatal(err)
		}
		r := req("outerloop/no-dir", sha)
		r.Dir = ""
		if err := DeleteBranch(bg, r); err != nil {
			t.Fatal(err)
		}
		if got := remote("outerloop/no-dir"); got != "" {
			t.Fatalf("the branch is still at %s", got)
		}
	})

	t.Run("ABranchSomeoneElsePushedToIsKept", func(t *testing.T) {
		const branch = "outerloop/shared"
		mine := e.branchCommit(t, branch, "shared.txt", "mine\n")
		if err := e.push(t, mine, branch, ""); err != nil {
			t.Fatal(err)
		}
		// A person with write access pushes on top, with their own token.
		person := e.srv.NewCollaborator(t, e.repo, "person")
		theirAuth, err := NewGitAuth(e.repo.CloneURL, person.Token())
		if err != nil {
			t.Fatal(err)
		}
		theirs := commitFile(t, e.dir, "theirs.txt", "theirs\n", "a person's fix")
		if err := Push(bg, PushRequest{Forge: "tea", Dir: e.dir, URL: e.repo.CloneURL, SHA: theirs, Branch: branch,
			Expected: mine, Auth: theirAuth}); err != nil {
			t.Fatal(err)
		}

		err = DeleteBranch(bg, req(branch, mine))
		fe := wantErr(t, err, workitems.ClassConflict, ErrStaleLease)
		noSecret(t, "the error", fe.Error(), e.secrets()...)
		if got := remote(branch); got != theirs {
			t.Fatalf("the branch is at %q, want the person's %s", got, theirs)
		}
	})

	t.Run("AProtectedBranchIsRefused", func(t *testing.T) {
		const branch = "release"
		sha := e.branchCommit(t, branch, "release.txt", "1.0\n")
		if err := e.push(t, sha, branch, ""); err != nil {
			t.Fatal(err)
		}
		e.srv.ProtectBranch(t, e.repo, branch)
		fe := wantErr(t, DeleteBranch(bg, req(branch, sha)), workitems.ClassPermission, ErrProtectedBranch)
		if !strings.Contains(fe.Message, "remote rejected") {
			t.Fatalf("message %q", fe.Message)
		}
		if got := remote(branch); got != sha {
			t.Fatalf("the protected branch is at %q, want %s", got, sha)
		}
	})

	t.Run("NoLeaseIsRefusedWithoutRunningGit", func(t *testing.T) {
		gitBin, argvLog := argvRecorder(t)
		for _, expected := range []string{"", "main", "abc123"} {
			r := req("main", expected)
			r.Git = gitBin
			wantErr(t, DeleteBranch(bg, r), workitems.ClassInvalidInput, nil)
		}
		if _, err := os.Stat(argvLog); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("git ran (%v)", err)
		}
		if got := remote("main"); got != e.base {
			t.Fatalf("main is at %q, want %s", got, e.base)
		}
	})
}
