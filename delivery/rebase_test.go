package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"outerloop/delivery"
	"outerloop/workitems"
)

// lines is a file of n numbered lines, the given ones replaced.
func lines(n int, replace map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		l, ok := replace[i]
		if !ok {
			l = fmt.Sprint("line ", i)
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// commitOn commits files on top of parent (detached) and returns the commit.
func (r *repo) commitOn(parent, msg string, files map[string]string) string {
	r.t.Helper()
	r.git("checkout", "-q", "--detach", parent)
	r.write(files)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// rebaseScene is last night's pull request (line 10 of a.txt changed on the old base) and
// tonight's attempt on where the base is now.
type rebaseScene struct {
	r                    *repo
	prHead, tip, attempt string
}

type sceneBase int

const (
	baseNotMoved sceneBase = iota
	baseMovedClean
	baseMovedConflict // the base changed line 11, next to the pull request's line 10
)

func newRebaseScene(t *testing.T, base sceneBase, change string) rebaseScene {
	t.Helper()
	r := newRepo(t, map[string]string{"a.txt": lines(20, nil), "b.txt": "b\n"})
	s := rebaseScene{r: r}
	s.prHead = r.commitOn(r.base, "outerloop: last night", map[string]string{"a.txt": lines(20, map[int]string{10: "X"})})
	switch base {
	case baseNotMoved:
		s.tip = r.base
	case baseMovedClean:
		s.tip = r.commitOn(r.base, "upstream: elsewhere", map[string]string{"b.txt": "b, moved\n"})
	case baseMovedConflict:
		s.tip = r.commitOn(r.base, "upstream: next to it", map[string]string{"a.txt": lines(20, map[int]string{11: "Y"})})
	}
	tipA := lines(20, map[int]string{10: change})
	if base == baseMovedConflict {
		tipA = lines(20, map[int]string{10: change, 11: "Y"})
	}
	s.attempt = r.commitOn(s.tip, "outerloop: tonight", map[string]string{"a.txt": tipA})
	return s
}

func (s rebaseScene) check(policy workitems.RebasePolicy, attempt int) delivery.RebaseCheck {
	return delivery.RebaseCheck{Policy: policy, Attempt: attempt, Workspace: s.r.dir, Base: s.tip, Commit: s.attempt, PRHead: s.prHead}
}

func TestTheRebasePolicyPushesOnlyWhatTheOpenPullRequestNeeds(t *testing.T) {
	t.Parallel()
	type want struct {
		reason    delivery.RebaseReason
		conflicts string
	}
	for _, tc := range []struct {
		name    string
		base    sceneBase
		change  string // line 10 of tonight's attempt ("X" is last night's)
		attempt int
		want    map[workitems.RebasePolicy]want
	}{
		{name: "same change, base moved without conflict", base: baseMovedClean, change: "X", attempt: 1,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseNotNeeded},
				workitems.RebaseBehind:     {reason: delivery.RebaseBehind},
				workitems.RebaseNever:      {reason: delivery.RebaseNotNeeded},
			}},
		{name: "same change, base moved with a conflict", base: baseMovedConflict, change: "X", attempt: 1,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseConflicted, conflicts: "a.txt"},
				workitems.RebaseBehind:     {reason: delivery.RebaseBehind},
				workitems.RebaseNever:      {reason: delivery.RebaseNotNeeded},
			}},
		{name: "same change, base not moved", base: baseNotMoved, change: "X", attempt: 1,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseUpToDate},
				workitems.RebaseBehind:     {reason: delivery.RebaseUpToDate},
				workitems.RebaseNever:      {reason: delivery.RebaseUpToDate},
			}},
		{name: "different change", base: baseMovedClean, change: "Z", attempt: 1,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseChanged},
				workitems.RebaseBehind:     {reason: delivery.RebaseChanged},
				workitems.RebaseNever:      {reason: delivery.RebaseChanged},
			}},
		{name: "different change, base not moved", base: baseNotMoved, change: "Z", attempt: 1,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseChanged},
				workitems.RebaseBehind:     {reason: delivery.RebaseChanged},
				workitems.RebaseNever:      {reason: delivery.RebaseChanged},
			}},
		{name: "retry of the same change on a moved base", base: baseMovedClean, change: "X", attempt: 2,
			want: map[workitems.RebasePolicy]want{
				workitems.RebaseConflicted: {reason: delivery.RebaseRetry},
				workitems.RebaseBehind:     {reason: delivery.RebaseRetry},
				workitems.RebaseNever:      {reason: delivery.RebaseRetry},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newRebaseScene(t, tc.base, tc.change)
			for _, policy := range workitems.AllRebasePolicies() {
				w := tc.want[policy]
				got, err := delivery.CheckRebase(context.Background(), s.check(policy, tc.attempt))
				if err != nil {
					t.Fatalf("%s: %v", policy, err)
				}
				if got.Reason != w.reason || got.Conflicts != w.conflicts {
					t.Errorf("%s: %+v; want reason %s, conflicts %q", policy, got, w.reason, w.conflicts)
				}
				wantPush := w.reason != delivery.RebaseUpToDate && w.reason != delivery.RebaseNotNeeded
				if got.Reason.Push() != wantPush {
					t.Errorf("%s: %s pushes %v", policy, got.Reason, got.Reason.Push())
				}
			}
		})
	}
}

func TestTheDefaultRebasePolicyIsConflictedAndTheItemsOwnPullRequestIsAlwaysUpdated(t *testing.T) {
	t.Parallel()
	s := newRebaseScene(t, baseMovedClean, "X")
	if got, err := delivery.CheckRebase(context.Background(), s.check("", 1)); err != nil || got.Reason != delivery.RebaseNotNeeded || !got.BaseMoved {
		t.Fatalf("default policy: %+v, %v", got, err)
	}
	c := s.check(workitems.RebaseNever, 1)
	c.OwnPR = true
	if got, err := delivery.CheckRebase(context.Background(), c); err != nil || got.Reason != delivery.RebaseRetry {
		t.Fatalf("own pull request: %+v, %v", got, err)
	}
	c = s.check("sometimes", 1)
	if _, err := delivery.CheckRebase(context.Background(), c); workitems.ClassOf(err) != workitems.ClassInvalidInput {
		t.Fatalf("unknown policy: %v", err)
	}
}

func TestAWhitespaceOnlyDifferenceIsADifferentChange(t *testing.T) {
	t.Parallel()
	s := newRebaseScene(t, baseMovedClean, "X ")
	if got, err := delivery.CheckRebase(context.Background(), s.check(workitems.RebaseNever, 1)); err != nil || got.Reason != delivery.RebaseChanged {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestThePullRequestHeadIsFetchedWhenTheWorkspaceLacksIt(t *testing.T) {
	t.Parallel()
	// The forge: a bare repository holding last night's branch.
	s := newRebaseScene(t, baseMovedConflict, "X")
	remote := t.TempDir()
	s.r.git("init", "-q", "--bare", remote)
	s.r.git("push", "-q", remote, s.prHead+":refs/heads/outerloop/bump")
	// The workspace: a clone of the base only, as the worker makes one.
	ws := &repo{t: t, dir: t.TempDir()}
	ws.git("init", "-q")
	ws.git("fetch", "-q", s.r.dir, s.attempt)
	if _, err := ws.rawErr("cat-file", "-e", s.prHead+"^{commit}"); err == nil {
		t.Fatal("the workspace has the pull request's head already")
	}
	c := s.check(workitems.RebaseConflicted, 1)
	c.Workspace = ws.dir
	if _, err := delivery.CheckRebase(context.Background(), c); err == nil {
		t.Fatal("no fetch URL: want an error")
	}
	c.FetchURL, c.FetchBranch = remote, "outerloop/bump"
	got, err := delivery.CheckRebase(context.Background(), c)
	if err != nil || got.Reason != delivery.RebaseConflicted {
		t.Fatalf("%+v, %v", got, err)
	}
	// The branch moved on since its pull request was read: transient, read it again.
	c.PRHead = strings.Repeat("ab", 20)
	if _, err := delivery.CheckRebase(context.Background(), c); workitems.ClassOf(err) != workitems.ClassTransient {
		t.Fatalf("a head no longer on the branch: %v", err)
	}
	c.FetchURL = remote + "-gone"
	if _, err := delivery.CheckRebase(context.Background(), c); workitems.ClassOf(err) != workitems.ClassTransient || errors.Is(err, context.Canceled) {
		t.Fatalf("an unreachable remote: %v", err)
	}
}

func TestAllRebaseReasonsAreListed(t *testing.T) {
	t.Parallel()
	held := 0
	for _, r := range delivery.AllRebaseReasons() {
		if !r.Push() {
			held++
		}
	}
	if len(delivery.AllRebaseReasons()) != 6 || held != 2 {
		t.Fatalf("%v", delivery.AllRebaseReasons())
	}
}

// rawErr runs git in the repository and returns its output and error (no failure).
func (r *repo) rawErr(args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", r.dir}, args...)...).CombinedOutput()
	return string(out), err
}
