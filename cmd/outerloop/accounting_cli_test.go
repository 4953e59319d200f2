package main

import (
	"context"
	"strings"
	"testing"

	"outerloop/workitems/itemstore"
)

// Through the real binary: enqueue past max_open exits non-zero naming it and creates nothing,
// --force creates it and records the actor; steer on a script item exits non-zero and stores
// nothing.
func TestCLIEnqueueHonoursMaxOpenAndSteerNeedsAnAgentLoop(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, `  - name: limited
    repo: REPO
    max_open: 1
    goal: one at a time
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`)
	c := newCLI(t, cfg)
	out, e, code := c.run("enqueue", "limited", "--actor", "alice")
	if code != 0 {
		t.Fatalf("first enqueue: %d %s %s", code, out, e)
	}
	first := enqueuedID(t, out)
	if _, e, code := c.run("enqueue", "limited", "--actor", "alice"); code == 0 || !strings.Contains(e, "max_open 1") || !strings.Contains(e, "--force") {
		t.Fatalf("enqueue past max_open: exit %d, %s", code, e)
	}
	s := c.store()
	ctx := context.Background()
	if items, _ := s.List(ctx, itemstore.ListOptions{Template: "limited"}); len(items) != 1 {
		t.Fatalf("a refused enqueue created an item: %d", len(items))
	}
	out, e, code = c.run("enqueue", "limited", "--force", "--actor", "bob")
	if code != 0 {
		t.Fatalf("forced enqueue: %d %s", code, e)
	}
	it, err := s.Get(ctx, enqueuedID(t, out))
	if err != nil || !it.Origin.Forced || it.Origin.Actor != "bob" {
		t.Fatalf("forced item %+v %v", it.Origin, err)
	}
	if _, e, code := c.run("steer", first, "look at the docs"); code == 0 || !strings.Contains(e, "reads no steer input") {
		t.Fatalf("steer of a script item: exit %d, %s", code, e)
	}
	if q, _ := s.PeekSteer(ctx, first, 0); len(q) != 0 {
		t.Fatalf("a refused steer was stored: %v", q)
	}
}
