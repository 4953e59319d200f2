package main

import (
	"context"
	"strings"
	"testing"

	"outerloop/workitems"
)

// TestCLIShowsTheDeliveryAndPrintsThePatch runs a real worker process, then reads the closed
// item's delivery with `items ID` and its patch with `items ID --diff`.
func TestCLIShowsTheDeliveryAndPrintsThePatch(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, fixTemplate)
	c := newCLI(t, cfg)
	c.start("worker", "--concurrency", "1", "--id", "w-deliver")
	out, errOut, code := c.run("enqueue", "fix")
	if code != 0 {
		t.Fatalf("enqueue: %d %s", code, errOut)
	}
	id := enqueuedID(t, out)
	it := awaitState(t, c.store(), id, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || it.Delivery == nil || it.Delivery.Attempt != 2 {
		t.Fatalf("want closed with a delivery: %s %+v", it.State, it.Delivery)
	}
	out, _, code = c.run("items", id)
	for _, want := range []string{"delivery: patch, mode patch, commit " + it.Delivery.Commit[:12], "1 file +1 -1", "calc.go +1 -1",
		"delivery committed", "delivery recorded"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("items %s lacks %q:\n%s", id, want, out)
		}
	}
	patch, err := c.store().Patch(context.Background(), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"items", id, "--diff"}, {"items", id, "--diff", "--attempt", "2"}} {
		out, errOut, code = c.run(args...)
		if code != 0 || out != string(patch) || !strings.Contains(out, "+func Add(a, b int) int { return a + b }") {
			t.Fatalf("%v: exit %d %s\n%s", args, code, errOut, out)
		}
	}
	out, _, _ = c.run("items", id, "--json")
	if !strings.Contains(out, `"delivery": {`) || !strings.Contains(out, `"outcome": "patch"`) {
		t.Errorf("items --json lacks the delivery:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"items", id, "--diff", "--attempt", "1"}, "no patch stored"},
		{[]string{"items", id, "--diff", "--attempt", "9"}, "--attempt \"9\": want a number from 1 to 2"},
		{[]string{"items", "--diff"}, "go with an item ID"},
		{[]string{"items", id, "--attempt", "2"}, "--attempt goes with --diff"},
		{[]string{"items", "nope", "--diff"}, "not found"},
	} {
		if _, e, code := c.run(tc.args...); code == 0 || !strings.Contains(e, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, e, tc.want)
		}
	}
}
