package publish

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
)

// Both ledgers keep the same record: pushed commits newest first and bounded, a hold that is
// new once, Once once per hold, a hand-back that ends the hold and takes the head as
// outerloop's, and Forget.
func TestBranchLedgers(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(t *testing.T, clock workitems.Clock) Branches{
		"redis": func(t *testing.T, clock workitems.Clock) Branches {
			env := redistest.New(t)
			return NewRedisBranches(env.Client, env.Prefix, time.Hour, clock)
		},
		"memory": func(*testing.T, workitems.Clock) Branches { return NewMemoryBranches() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := fakeclock.New(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
			b := mk(t, clock)
			k := BranchKey{Forge: "tea", Repo: "Acme/Calc", Branch: "outerloop/bump"}
			sha := func(i int) string { return fmt.Sprintf("%040x", i) }
			for i := range MaxPushedKept + 5 + 17 {
				if err := b.Pushing(ctx, k, sha(i)); err != nil {
					t.Fatal(err)
				}
				clock.Advance(time.Second)
			}
			rec, err := b.Branch(ctx, BranchKey{Forge: "tea", Repo: "acme/calc", Branch: "outerloop/bump"}) // the repository's case does not matter
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Pushed) < MaxPushedKept || len(rec.Pushed) > MaxPushedKept+16 || rec.Pushed[0] != sha(MaxPushedKept+21) || rec.Ours(sha(0)) || !rec.Ours(sha(22)) || rec.Hold != nil {
				t.Fatalf("pushed %d, newest %s, hold %+v", len(rec.Pushed), rec.Pushed[0], rec.Hold)
			}
			h := workitems.BranchHold{User: "Pat Person", SHA: strings.Repeat("p", 40), Commits: 1, Since: clock.Now()}
			for i, want := range []bool{true, false} {
				first, err := b.Hold(ctx, k, h)
				if err != nil || first != want {
					t.Fatalf("hold %d: first %v, %v", i, first, err)
				}
			}
			for i, want := range []bool{true, false} {
				if first, err := b.Once(ctx, k, "obsolete"); err != nil || first != want {
					t.Fatalf("once %d: %v, %v", i, first, err)
				}
			}
			if rec, _ = b.Branch(ctx, k); rec.Hold == nil || rec.Hold.User != "Pat Person" || !rec.Hold.Since.Equal(h.Since) {
				t.Fatalf("hold %+v", rec.Hold)
			}
			if held, err := b.HandBack(ctx, k, h.SHA); err != nil || !held {
				t.Fatalf("hand back: %v, %v", held, err)
			}
			if held, err := b.HandBack(ctx, k, h.SHA); err != nil || held {
				t.Fatalf("hand back again: %v, %v", held, err)
			}
			if rec, _ = b.Branch(ctx, k); rec.Hold != nil || !rec.Ours(h.SHA) {
				t.Fatalf("after the hand-back: hold %+v, head ours %v", rec.Hold, rec.Ours(h.SHA))
			}
			if first, _ := b.Once(ctx, k, "obsolete"); !first {
				t.Fatal("a hand-back starts what is said once afresh")
			}
			if existed, err := b.Forget(ctx, k); err != nil || !existed {
				t.Fatalf("forget: %v, %v", existed, err)
			}
			if existed, err := b.Forget(ctx, k); err != nil || existed {
				t.Fatalf("forget again: %v, %v", existed, err)
			}
			if rec, _ = b.Branch(ctx, k); len(rec.Pushed) != 0 || rec.Hold != nil {
				t.Fatalf("after Forget: %+v", rec)
			}
			other, _ := b.Branch(ctx, BranchKey{Forge: "tea", Repo: "acme/calc", Branch: "outerloop/other"})
			if len(other.Pushed) != 0 {
				t.Fatal("branches share a record")
			}
		})
	}
}

// The body keeps what people wrote around outerloop's section; an old body with only the
// marker was all outerloop's; a body whose section a person removed keeps its text.
func TestMergeBody(t *testing.T) {
	t.Parallel()
	next := section("new text\n" + marker("i@2", strings.Repeat("b", 40)))
	for _, c := range []struct{ name, old, want string }{
		{"section", "Above.\n\n" + section("old\n"+marker("i@1", strings.Repeat("a", 40))) + "\n\nBelow.", "Above.\n\n" + next + "\n\nBelow."},
		{"legacy", "Made by outerloop.\n\n" + marker("i@1", strings.Repeat("a", 40)), next},
		{"removed", "A person replaced it all.", "A person replaced it all.\n\n" + next},
		{"empty", "", next},
	} {
		if got := mergeBody(c.old, next); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	if got := mergeBody("x "+section("a")+" y "+section("b"), next); strings.Count(got, "outerloop:begin") != 2 || !strings.HasPrefix(got, "x "+next) {
		t.Errorf("two sections: the first is rewritten: %q", got)
	}
}

// A commit's author name is anyone's to write: repeated on the pull request it is one line and
// cannot mention, link or command.
func TestPersonName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Pat Person":                     "Pat Person",
		"@everyone [x](http://e.vil)":    "everyone x(http:e.vil)",
		"/outerloop rebase\nsecond line": "outerloop rebase second line",
		"`":                              "someone",
	} {
		if got := personName(in); got != want {
			t.Errorf("personName(%q) = %q, want %q", in, got, want)
		}
	}
}
