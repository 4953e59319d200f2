package forge

import (
	"context"
	"errors"
	"testing"

	"outerloop/proc"
	"outerloop/workitems"
)

// git push --porcelain's line for the branch decides what a refused push is: a lost lease and a
// ref another push was updating at that moment are tried again; a rule of the remote (a
// protected branch, a hook) is a person's to lift.
func TestARefusedPushIsClassifiedByWhatTheRemoteSaid(t *testing.T) {
	t.Parallel()
	r := &PushRequest{Forge: "tea", Branch: "outerloop/fix"}
	for _, c := range []struct {
		summary string
		want    error
		class   workitems.ErrorClass
	}{
		{"[remote rejected] (failed to update ref)", ErrStaleLease, workitems.ClassConflict},
		{"[remote rejected] (protected branch hook declined)", ErrProtectedBranch, workitems.ClassPermission},
		{"[rejected] (stale info)", ErrStaleLease, workitems.ClassConflict},
		{"[rejected] (fetch first)", ErrStaleLease, workitems.ClassConflict},
	} {
		out := "To http://forge/acme/calc.git\n!\tHEAD:refs/heads/outerloop/fix\t" + c.summary + "\nDone\n"
		err := pushFailure(context.Background(), "push", r, proc.Result{ExitCode: 1}, out)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, c.want) || fe.Class != c.class {
			t.Errorf("%q: %v, want %v (%s)", c.summary, err, c.want, c.class)
		}
	}
}
