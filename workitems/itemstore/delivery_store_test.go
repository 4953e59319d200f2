package itemstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// verifying creates an item of template tmpl and runs its first attempt to verifying.
func verifying(t *testing.T, s *itemstore.Store, id, tmpl string) *itemstore.Fence {
	t.Helper()
	ctx := context.Background()
	it := newItem(id)
	it.Template = tmpl
	if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f := mustLease(t, s, id, 1)
	if _, _, err := s.StartAttempt(ctx, f, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{Steps: 1}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	return f
}

func patchDelivery(baseTree, tree string) *workitems.Delivery {
	return &workitems.Delivery{Mode: workitems.DeliverPatch, Outcome: workitems.DeliveryPatched, Base: "commit-of-" + baseTree, BaseTree: baseTree,
		Commit: "c-" + tree, Tree: tree,
		Files: []workitems.ChangedFile{{Path: "calc.go", Added: 1, Deleted: 1}}, FileCount: 1, Added: 1, Deleted: 1, PatchBytes: 12}
}

var closeGreen = workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Reasons: []string{"all green: 1 tests passed"}, Actor: "verifier"}

func TestRecordDeliveryStoresTheRecordAndThePatchWithTheDecision(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	f := verifying(t, s, "d@1", "tmpl")
	patch := []byte("diff --git a/calc.go b/calc.go\n")
	it, err := s.RecordDelivery(ctx, f, closeGreen, &workitems.Verdict{Passed: 1}, patchDelivery("base1", "tree1"), patch)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateClosed || it.Delivery == nil || it.Attempts[0].Delivery == nil {
		t.Fatalf("closed with the delivery on the item and the attempt: %s %+v", it.State, it.Delivery)
	}
	if d := it.Delivery; d.Attempt != 1 || d.Outcome != workitems.DeliveryPatched || d.At.IsZero() || d.Commit != "c-tree1" {
		t.Fatalf("delivery record: %+v", d)
	}
	got, err := s.Patch(ctx, "d@1", 1)
	if err != nil || string(got) != string(patch) {
		t.Fatalf("patch %q %v", got, err)
	}
	if _, err := s.Patch(ctx, "d@1", 2); !errors.Is(err, itemstore.ErrNoPatch) {
		t.Fatalf("an attempt without a patch: %v", err)
	}
	if _, err := s.Patch(ctx, "nope", 1); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("an unknown item: %v", err)
	}
	// The delivery event is written with the state change and the decision, in one transaction.
	evs, _ := s.Events(ctx, "d@1", "", 100, 0)
	var order []string
	for _, e := range evs[len(evs)-3:] {
		order = append(order, string(e.Type)+":"+e.Data["step"])
	}
	if fmt.Sprint(order) != "[state: delivery:recorded decision:]" {
		t.Fatalf("last events: %v", order)
	}
	if e := evs[len(evs)-2]; e.Data["outcome"] != "patch" || e.Data["commit"] != "c-tree1" || e.Data["patch_bytes"] != "12" {
		t.Fatalf("delivery event data: %v", e.Data)
	}
	// A fenced write from a stale epoch changes nothing, patch included.
	stale := *verifying(t, s, "d@2", "other")
	stale.Epoch-- // an older execution of the attempt
	if _, err := s.RecordDelivery(ctx, &stale, closeGreen, nil, patchDelivery("b", "t"), []byte("x")); !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("stale fence: %v", err)
	}
	if _, err := s.Patch(ctx, "d@2", 1); !errors.Is(err, itemstore.ErrNoPatch) {
		t.Fatalf("a refused write stored a patch: %v", err)
	}
}

// A delivered patch becomes its template's last (LastDelivered); the record of the same tree on
// the same base tree by another item of the template is refused (the delivery is to find it
// already delivered and the policy to decide) and changes nothing; another tree, base or
// template is new.
func TestRecordDeliveryRefusesTheSameTreeAnotherItemDeliveredMeanwhile(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if last, err := s.LastDelivered(ctx, "bump"); err != nil || last != nil {
		t.Fatalf("before any delivery: %+v %v", last, err)
	}
	first, err := s.RecordDelivery(ctx, verifying(t, s, "bump@1", "bump"), closeGreen, nil, patchDelivery("base1", "treeA"), []byte("p1"))
	if err != nil || first.Delivery.Outcome != workitems.DeliveryPatched {
		t.Fatalf("first: %v %+v", err, first.Delivery)
	}
	last, err := s.LastDelivered(ctx, "bump")
	if err != nil || last == nil || last.Item != "bump@1" || last.Tree != "treeA" || last.BaseTree != "base1" || last.Commit != "c-treeA" {
		t.Fatalf("the template's last delivered: %+v %v", last, err)
	}
	f2 := verifying(t, s, "bump@2", "bump")
	_, err = s.RecordDelivery(ctx, f2, closeGreen, nil, patchDelivery("base1", "treeA"), []byte("p1"))
	if !errors.Is(err, itemstore.ErrDeliveredMeanwhile) || workitems.ClassOf(err) != workitems.ClassTransient || !strings.Contains(err.Error(), "bump@1") {
		t.Fatalf("the same tree again: %v (class %s), want ErrDeliveredMeanwhile naming bump@1, transient", err, workitems.ClassOf(err))
	}
	if second, _ := s.Get(ctx, "bump@2"); second.State != workitems.StateVerifying || second.Delivery != nil || len(second.Decisions) != 0 {
		t.Fatalf("a refused record changed the item: %s %+v", second.State, second.Delivery)
	}
	if _, err := s.Patch(ctx, "bump@2", 1); !errors.Is(err, itemstore.ErrNoPatch) {
		t.Fatalf("a refused record stored a patch: %v", err)
	}
	// The delivery found it already there: recorded as unchanged, the last stays bump@1's.
	unchanged := patchDelivery("base1", "treeA")
	unchanged.Outcome, unchanged.SameAs = workitems.DeliveryUnchanged, &workitems.DeliveryRef{Item: "bump@1", Attempt: 1, Commit: "c-treeA"}
	done := workitems.Decision{Outcome: workitems.OutcomeClose, Rule: workitems.RuleAlreadyDelivered, Reasons: []string{"nothing new"}, Actor: "verifier"}
	if second, err := s.RecordDelivery(ctx, f2, done, nil, unchanged, nil); err != nil || second.State != workitems.StateClosed ||
		second.Delivery.SameAs == nil || second.Delivery.SameAs.Item != "bump@1" {
		t.Fatalf("recorded unchanged: %v %+v", err, second)
	}
	// Another tree, or the same tree on a moved base, is new.
	third, _ := s.RecordDelivery(ctx, verifying(t, s, "bump@3", "bump"), closeGreen, nil, patchDelivery("base1", "treeB"), nil)
	fourth, _ := s.RecordDelivery(ctx, verifying(t, s, "bump@4", "bump"), closeGreen, nil, patchDelivery("base2", "treeB"), nil)
	// Another template's identical tree is its own.
	other, _ := s.RecordDelivery(ctx, verifying(t, s, "lint@1", "lint"), closeGreen, nil, patchDelivery("base2", "treeB"), nil)
	for _, it := range []*workitems.Item{third, fourth, other} {
		if it == nil || it.Delivery.Outcome != workitems.DeliveryPatched || it.Delivery.SameAs != nil {
			t.Errorf("%+v", it)
		}
	}
	// The template's last delivered result is now bump@4's.
	if last, _ := s.LastDelivered(ctx, "bump"); last == nil || last.Item != "bump@4" {
		t.Fatalf("last: %+v", last)
	}
}

func TestConcurrentIdenticalDeliveriesDeliverOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	const n = 6
	fences := make([]*itemstore.Fence, n)
	for i := range fences {
		fences[i] = verifying(t, s, fmt.Sprintf("race@%d", i), "race")
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, f := range fences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.RecordDelivery(ctx, f, closeGreen, nil, patchDelivery("b", "same"), []byte("p"))
		}()
	}
	wg.Wait()
	delivered := 0
	for i, err := range errs {
		switch {
		case err == nil:
			delivered++
		case !errors.Is(err, itemstore.ErrDeliveredMeanwhile):
			t.Errorf("race@%d: %v", i, err)
		}
	}
	if delivered != 1 {
		t.Fatalf("want exactly one delivered patch of %d identical results, got %d (%v)", n, delivered, errs)
	}
}

func TestRecordDeliveryOfARetryKeepsTheItemsEarlierDelivery(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	f := verifying(t, s, "pr@1", "pr")
	failed := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryFailed, Base: "b", Commit: "c1",
		Error: "forge delivery not configured", ErrorClass: workitems.ClassInvalidInput}
	esc := workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: workitems.RuleDeliveryFailed, Summary: "delivery failed", Actor: "verifier"}
	it, err := s.RecordDelivery(ctx, f, esc, nil, failed, []byte("p"))
	if err != nil || it.State != workitems.StateEscalated || it.Delivery.ErrorClass != workitems.ClassInvalidInput {
		t.Fatalf("escalated with the failed delivery: %v %s %+v", err, it.State, it.Delivery)
	}
	evs, _ := s.Events(ctx, "pr@1", "", 100, 0)
	found := false
	for _, e := range evs {
		if e.Type == workitems.EventDelivery && strings.Contains(e.Message, "forge delivery not configured") {
			found = true
		}
	}
	if !found {
		t.Fatal("the delivery error is not in the event log")
	}
	// A person retries; the next attempt fails its tests: no delivery, the item keeps the last.
	if _, err := s.Resolve(ctx, "pr@1", workitems.Resolution{Action: "retry", Actor: "p", Input: "configure the forge"}); err != nil {
		t.Fatal(err)
	}
	f2 := mustLease(t, s, "pr@1", 2)
	if _, _, err := s.StartAttempt(ctx, f2, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f2, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	it, err = s.RecordDelivery(ctx, f2, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "tests_failed", Actor: "verifier"}, nil, nil, nil)
	if err != nil || it.Delivery == nil || it.Delivery.Attempt != 1 || it.Attempts[1].Delivery != nil {
		t.Fatalf("after a decision without delivery: %v %+v", err, it.Delivery)
	}
}

func TestDeleteRemovesTheItemWithItsPatches(t *testing.T) {
	t.Parallel()
	s, env := newStore(t)
	ctx := context.Background()
	if _, err := s.RecordDelivery(ctx, verifying(t, s, "del@1", "del"), closeGreen, nil, patchDelivery("b", "t"), []byte("patch")); err != nil {
		t.Fatal(err)
	}
	if err := s.Steer(ctx, "del@1", "late words", "p"); err != nil {
		t.Fatal(err)
	}
	keep := verifying(t, s, "del@2", "del") // open: refused, and untouched by the other's delete
	if err := s.Delete(ctx, "del@2"); !errors.Is(err, workitems.ErrInvalidTransition) {
		t.Fatalf("deleting an open item: %v", err)
	}
	if err := s.Delete(ctx, "del@1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "del@1"); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := s.Patch(ctx, "del@1", 1); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("patch after delete: %v", err)
	}
	if err := s.Delete(ctx, "del@1"); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	var left []string
	iter := env.Client.Scan(ctx, 0, env.Prefix+"*del@1*", 100).Iterator()
	for iter.Next(ctx) {
		left = append(left, iter.Val())
	}
	if len(left) > 0 {
		t.Fatalf("keys of the deleted item remain: %v", left)
	}
	indexes := []string{env.Prefix + "items", env.Prefix + "tmpl:del", env.Prefix + "escalated"}
	ix := env.Client.Scan(ctx, 0, env.Prefix+"ix:*", 1000).Iterator()
	for ix.Next(ctx) {
		indexes = append(indexes, ix.Val())
	}
	if len(indexes) < 8 {
		t.Fatalf("expected the ordered indexes to exist, found %v", indexes)
	}
	for _, k := range indexes {
		members, _ := env.Client.ZRange(ctx, k, 0, -1).Result()
		for _, m := range members {
			if m == "del@1" {
				t.Errorf("index %s still lists the deleted item", k)
			}
		}
	}
	if n, _ := env.Client.Exists(ctx, env.Prefix+"delivered:del").Result(); n != 0 {
		t.Error("the template's last delivered record still points at the deleted item")
	}
	st, _ := s.Stats(ctx)
	if st.Items["del"][workitems.StateClosed] != 0 || st.Items["del"][workitems.StateVerifying] != 1 {
		t.Fatalf("counts after delete: %v", st.Items["del"])
	}
	if it, err := s.Get(ctx, keep.Item); err != nil || it.State != workitems.StateVerifying {
		t.Fatalf("the other item: %v", err)
	}
	all, _ := s.AllEvents(ctx, "", 1000, 0)
	if e := all[len(all)-1]; e.Type != workitems.EventDeleted || e.Item != "del@1" {
		t.Fatalf("the deployment log does not record the delete: %+v", e)
	}
}
