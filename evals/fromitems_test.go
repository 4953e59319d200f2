package evals

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

type itemSpec struct {
	id, tmpl string
	state    workitems.State
	base     bool // the first attempt recorded its workspace base
}

// itemStore makes items one minute apart from 2026-01-01 00:01 UTC, in the order given.
func itemStore(t *testing.T, specs []itemSpec) (*itemstore.Store, time.Time) {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := fakeclock.New(start)
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	for _, sp := range specs {
		clock.Advance(time.Minute)
		first := workitems.Attempt{N: 1, State: workitems.AttemptQueued, Condition: workitems.Condition{Input: "input of " + sp.id}}
		if sp.base {
			first.Base = &workitems.WorkspaceBase{Kind: workitems.BaseGit, Commit: "c0ffee-" + sp.id, Tree: "t",
				Source: "https://gitea.example.com/acme/calc.git", Branch: "main", At: clock.Now()}
		}
		it := &workitems.Item{ID: sp.id, Template: sp.tmpl, Goal: "goal of " + sp.id,
			Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
			Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3,
			Attempts: []workitems.Attempt{first,
				{N: 2, State: workitems.AttemptQueued, Condition: workitems.Condition{Input: "second input"}}},
		}
		if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		if sp.state != "" && sp.state != workitems.StateQueued {
			if _, err := s.Update(ctx, it.ID, nil, func(it *workitems.Item) ([]workitems.Event, error) {
				return nil, it.SetState(sp.state)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, start
}

func taskIDs(ts []Task) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return strings.Join(out, ",")
}

func TestTasksFromItems(t *testing.T) {
	t.Parallel()
	s, start := itemStore(t, []itemSpec{
		{"i1", "fix-calc", workitems.StateCancelled, true},
		{"i2", "bump", workitems.StateRunning, true},
		{"i3", "fix-calc", workitems.StateRunning, false},
		{"i4", "fix-calc", workitems.StateQueued, true},
		{"i5", "bump", workitems.StateCancelled, true},
	})
	ctx := context.Background()
	at := func(min int) time.Time { return start.Add(time.Duration(min) * time.Minute) }

	tasks, skipped, err := TasksFromItems(ctx, s, ItemFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(tasks); got != "i1,i2,i4,i5" || !slices.Equal(skipped, []string{"i3"}) {
		t.Errorf("all: tasks %s, skipped %v", got, skipped)
	}
	want := Task{ID: "i1", Template: "fix-calc", Repo: "https://gitea.example.com/acme/calc.git",
		Ref: "c0ffee-i1", Goal: "goal of i1", Input: "input of i1"}
	if tasks[0] != want {
		t.Errorf("task %+v, want %+v", tasks[0], want)
	}

	cases := []struct {
		name          string
		f             ItemFilter
		tasks, skiped string
	}{
		{"template", ItemFilter{Template: "fix-calc"}, "i1,i4", "i3"},
		{"state", ItemFilter{States: []workitems.State{workitems.StateRunning}}, "i2", "i3"},
		{"states", ItemFilter{States: []workitems.State{workitems.StateCancelled, workitems.StateQueued}}, "i1,i5,i4", ""},
		{"template and state", ItemFilter{Template: "bump", States: []workitems.State{workitems.StateCancelled}}, "i5", ""},
		{"from", ItemFilter{CreatedFrom: at(3)}, "i4,i5", "i3"},
		{"to (exclusive)", ItemFilter{CreatedTo: at(3)}, "i1,i2", ""},
		{"range", ItemFilter{CreatedFrom: at(2), CreatedTo: at(5)}, "i2,i4", "i3"},
		{"ids", ItemFilter{IDs: []string{"i5", "i3", "i1"}}, "i5,i1", "i3"},
		{"ids and template", ItemFilter{IDs: []string{"i5", "i1"}, Template: "bump"}, "i5", ""},
		{"limit", ItemFilter{Limit: 2}, "i1,i2", ""},
	}
	for _, c := range cases {
		tasks, skipped, err := TasksFromItems(ctx, s, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, sk := taskIDs(tasks), strings.Join(skipped, ","); got != c.tasks || sk != c.skiped {
			t.Errorf("%s: tasks %s skipped %s, want %s and %s", c.name, got, sk, c.tasks, c.skiped)
		}
	}

	if _, _, err := TasksFromItems(ctx, s, ItemFilter{IDs: []string{"i1", "gone", "lost"}}); err == nil ||
		!strings.Contains(err.Error(), "no item gone, lost") {
		t.Errorf("unknown ids: %v", err)
	}
}

func TestTasksFromItemsPages(t *testing.T) {
	t.Parallel()
	var specs []itemSpec
	for i := range itemPage + 5 {
		specs = append(specs, itemSpec{id: fmt.Sprintf("p%03d", i), tmpl: "bump", base: i%10 != 0})
	}
	s, _ := itemStore(t, specs)
	tasks, skipped, err := TasksFromItems(context.Background(), s, ItemFilter{Template: "bump"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks)+len(skipped) != itemPage+5 || len(skipped) != 11 || tasks[len(tasks)-1].ID != "p104" {
		t.Errorf("%d tasks, %d skipped, last %s", len(tasks), len(skipped), tasks[len(tasks)-1].ID)
	}
}

func TestSanitizeID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"01J0ABC":               "01J0ABC",
		"a:b/c d":               "a-b-c-d",
		"-x":                    "t-x",
		"":                      "t",
		strings.Repeat("y", 70): strings.Repeat("y", 64),
	} {
		if got := SanitizeID(in); got != want || !ValidID(got) {
			t.Errorf("SanitizeID(%q) = %q, want %q", in, got, want)
		}
	}
	taken := map[string]bool{}
	if a, b := uniqueID("a-b", taken), uniqueID("a-b", taken); a != "a-b" || b != "a-b-2" {
		t.Errorf("unique: %s %s", a, b)
	}
}
