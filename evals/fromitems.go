package evals

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// ItemFilter selects past items for --from-items. Empty fields select everything.
type ItemFilter struct {
	Template string
	States   []workitems.State
	// CreatedFrom and CreatedTo bound the creation time: from inclusive, to exclusive, so
	// that consecutive ranges never share an item. Zero is unbounded.
	CreatedFrom, CreatedTo time.Time
	// IDs selects these items (the other fields still filter them); an id not in the store is
	// an error.
	IDs   []string
	Limit int // at most this many tasks (0: no limit)
}

// itemPage is how many items one read fetches.
const itemPage = 100

// TasksFromItems builds one task per selected item, oldest first: the item's template, its
// repo at the first attempt's recorded base commit, its goal, and the first attempt's input.
// An item without a recorded base (it never prepared a workspace) cannot be re-run from the
// same commit: it is skipped and its id returned in skipped, never fatal. Items are read a
// page at a time.
func TasksFromItems(ctx context.Context, s *itemstore.Store, f ItemFilter) (tasks []Task, skipped []string, err error) {
	taskIDs := map[string]bool{}
	seen := map[string]bool{} // an item is listed once even if two states' pages both hold it
	// visit takes one item; it reports false once the limit is reached.
	visit := func(it *workitems.Item) bool {
		if seen[it.ID] || !f.matches(it) {
			return true
		}
		seen[it.ID] = true
		t, ok := taskFromItem(it)
		if !ok {
			skipped = append(skipped, it.ID)
			return true
		}
		t.ID = uniqueID(SanitizeID(it.ID), taskIDs)
		tasks = append(tasks, t)
		return f.Limit <= 0 || len(tasks) < f.Limit
	}

	if len(f.IDs) > 0 {
		var missing []string
		for ids := range slices.Chunk(f.IDs, itemPage) {
			items, err := s.GetMany(ctx, ids)
			if err != nil {
				return nil, nil, fmt.Errorf("evals: from items: %w", err)
			}
			for _, id := range ids {
				it, ok := items[id]
				if !ok {
					missing = append(missing, id)
					continue
				}
				if !visit(it) {
					return tasks, skipped, nil
				}
			}
		}
		if len(missing) > 0 {
			return nil, nil, fmt.Errorf("evals: from items: no item %s", strings.Join(missing, ", "))
		}
		return tasks, skipped, nil
	}

	states := f.States
	if len(states) == 0 {
		states = []workitems.State{""} // the index of every state
	}
	for _, st := range states {
		for off := 0; ; off += itemPage {
			page, err := s.List(ctx, itemstore.ListOptions{State: st, Template: f.Template,
				Sort: itemstore.SortOldest, Limit: itemPage, Offset: off})
			if err != nil {
				return nil, nil, fmt.Errorf("evals: from items: %w", err)
			}
			for _, it := range page {
				// Oldest first: past the range's end nothing later can match.
				if !f.CreatedTo.IsZero() && !it.CreatedAt.Before(f.CreatedTo) {
					page = nil
					break
				}
				if !visit(it) {
					return tasks, skipped, nil
				}
			}
			if len(page) < itemPage {
				break
			}
		}
	}
	return tasks, skipped, nil
}

func (f ItemFilter) matches(it *workitems.Item) bool {
	switch {
	case f.Template != "" && it.Template != f.Template:
		return false
	case len(f.States) > 0 && !slices.Contains(f.States, it.State):
		return false
	case !f.CreatedFrom.IsZero() && it.CreatedAt.Before(f.CreatedFrom):
		return false
	case !f.CreatedTo.IsZero() && !it.CreatedAt.Before(f.CreatedTo):
		return false
	}
	return true
}

// taskFromItem is the task of one item (its ID still to be made); false when the item has no
// recorded base.
func taskFromItem(it *workitems.Item) (Task, bool) {
	var first *workitems.Attempt
	for i := range it.Attempts {
		if a := &it.Attempts[i]; first == nil || a.N < first.N {
			first = a
		}
	}
	if first == nil || first.Base == nil || first.Base.Commit == "" {
		return Task{}, false
	}
	repo := first.Base.Source
	if it.Repo != "" {
		repo = it.Repo // a fleet's item: its own repository, not the template's list
	}
	return Task{
		Template: it.Template,
		// Source is the repo as the template named it then (credentials removed); the
		// template may have moved on since.
		Repo:  repo,
		Ref:   first.Base.Commit,
		Goal:  it.Goal,
		Input: first.Condition.Input,
	}, true
}

// SanitizeID turns s into a valid task id (see IDChars): other characters become '-', and
// it is cut to 64 characters.
func SanitizeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := string(b)
	if len(out) > 64 {
		out = out[:64]
	}
	if out == "" || !ValidID(out) { // empty, or starting with '.', '_' or '-'
		out = "t" + out
		if len(out) > 64 {
			out = out[:64]
		}
	}
	return out
}

// uniqueID returns id, or id with a numeric suffix when sanitising made it equal to one taken.
func uniqueID(id string, taken map[string]bool) string {
	out := id
	for n := 2; taken[out]; n++ {
		suffix := fmt.Sprintf("-%d", n)
		out = id[:min(len(id), 64-len(suffix))] + suffix
	}
	taken[out] = true
	return out
}
