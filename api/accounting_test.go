package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

const accountingYAML = `
defaults:
  budget: {wall_time: 10m}
providers:
  local: {kind: openai-responses, base_url: "http://127.0.0.1:9", api_key_env: OUTERLOOP_TEST_UNUSED_KEY, model: m}
templates:
  - name: limited
    max_open: 1
    goal: one at a time
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: agent
    goal: look around
    loop: {kind: agent, provider: local}
    done_check: {commands: ["true"]}
`

func (f *fixture) templateItems(t *testing.T, template string) []*workitems.Item {
	t.Helper()
	items, err := f.store.List(context.Background(), itemstore.ListOptions{Template: template, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// A person's enqueue is held to max_open like a cron tick: 409 naming max_open and nothing
// created; with force it is created, and the item and its log say who forced it.
func TestManualEnqueueRespectsMaxOpenUnlessForced(t *testing.T) {
	t.Parallel()
	f := newFixtureYAML(t, token, accountingYAML)
	if code, m := f.do(t, "POST", "/api/items", `{"template":"limited"}`, token); code != 201 {
		t.Fatalf("first enqueue: %d %v", code, m)
	}
	code, m := f.do(t, "POST", "/api/items", `{"template":"limited"}`, token)
	if msg, _ := m["error"].(string); code != 409 || !strings.Contains(msg, "max_open 1") || !strings.Contains(msg, "force") {
		t.Fatalf("enqueue past max_open: %d %v, want 409 naming max_open and force", code, m)
	}
	if n := len(f.templateItems(t, "limited")); n != 1 {
		t.Fatalf("a refused enqueue created an item: %d items", n)
	}
	code, m = f.do(t, "POST", "/api/items", `{"template":"limited","force":true}`, token)
	if code != 201 {
		t.Fatalf("forced enqueue: %d %v", code, m)
	}
	it, err := f.store.Get(context.Background(), m["id"].(string))
	if err != nil || !it.Origin.Forced || it.Origin.Actor != "tester" {
		t.Fatalf("forced item's origin %+v (%v), want forced by tester", it.Origin, err)
	}
	evs, _ := f.store.Events(context.Background(), it.ID, "", 100, 0)
	var recorded bool
	for _, e := range evs {
		if e.Data["forced"] == "max_open" && e.Actor == "tester" && strings.Contains(e.Message, "max_open 1") {
			recorded = true
		}
	}
	if !recorded {
		t.Fatalf("the force is not in the item's log: %+v", evs)
	}
}

// Steer is stored only for an item whose loop reads steer input (agent) and is running or queued; a script item and an
// ended agent item are refused with 409, and nothing is queued.
func TestSteerIsRefusedUnlessAnAgentLoopIsRunningOrQueued(t *testing.T) {
	t.Parallel()
	f := newFixtureYAML(t, token, accountingYAML)
	ctx := context.Background()
	submit := func(tmpl string) string {
		it, err := f.queue.Submit(ctx, scheduler.Request{Template: tmpl, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		return it.ID
	}
	agent, script, ended := submit("agent"), submit("limited"), submit("agent")
	fence, _ := f.store.AcquireLease(ctx, ended, 1, "w", time.Minute)
	_, _, _ = f.store.StartAttempt(ctx, fence, "w")
	_, _ = f.store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitNeedsInput}, workitems.Spend{}, "", false)
	if _, err := f.store.RecordDecision(ctx, fence, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "needs_input", Actor: "verifier"}, nil); err != nil {
		t.Fatal(err)
	}
	if code, m := f.do(t, "POST", "/api/items/"+agent+"/steer", `{"text":"look at the docs"}`, token); code != 202 {
		t.Fatalf("steer a queued agent item: %d %v", code, m)
	}
	for id, want := range map[string]string{script: `loop is "script"`, ended: "escalated"} {
		code, m := f.do(t, "POST", "/api/items/"+id+"/steer", `{"text":"unread"}`, token)
		if msg, _ := m["error"].(string); code != 409 || !strings.Contains(msg, want) || !strings.Contains(msg, "reads steer input") {
			t.Errorf("steer %s: %d %v, want 409 naming %q", id, code, m, want)
		}
		if q, _ := f.store.PeekSteer(ctx, id, 0); len(q) != 0 {
			t.Errorf("refused steer of %s was stored: %v", id, q)
		}
		evs, _ := f.store.Events(ctx, id, "", 100, 0)
		for _, e := range evs {
			if e.Type == workitems.EventSteer {
				t.Errorf("refused steer of %s left an event: %+v", id, e)
			}
		}
	}
}

// A retry's caps in the body take the config's units as strings ("1h", "2.5") beside numbers.
func TestResolveBudgetTakesTheConfigsUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.escalated(t)
	code, m := f.do(t, "POST", "/api/items/"+id+"/resolve",
		`{"action":"retry","input":"go on","budget":{"wall_time":"1h","cost_usd":"2.5","steps":7},"item_budget":{"wall_time":"3h"}}`, token)
	if code != 200 {
		t.Fatalf("resolve: %d %v", code, m)
	}
	it, _ := f.store.Get(context.Background(), id)
	b := it.Attempts[1].Condition.Budget
	if b.WallTime.D() != time.Hour || b.CostUSD != 2.5 || b.Steps != 7 || it.ItemBudget.WallTime.D() != 3*time.Hour {
		t.Fatalf("retry caps %+v, item caps %+v", b, it.ItemBudget)
	}
	id = f.escalated(t)
	code, m = f.do(t, "POST", "/api/items/"+id+"/resolve", `{"action":"retry","input":"x","budget":{"wall_time":"soon"}}`, token)
	if msg, _ := m["error"].(string); code != 400 || !strings.Contains(msg, "wall_time") || !strings.Contains(msg, "duration") {
		t.Fatalf("bad duration: %d %v", code, m)
	}
	if after, _ := f.store.Get(context.Background(), id); len(after.Attempts) != 1 || after.State != workitems.StateEscalated {
		t.Fatalf("a refused resolve changed the item: %s, %d attempts", after.State, len(after.Attempts))
	}
}

// A running item's view carries what its attempt has been charged so far, so its wall time is
// not 0 s until it exits; a stale fence charges nothing.
func TestARunningItemShowsItsSpendSoFar(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	ctx := context.Background()
	it, err := f.queue.Submit(ctx, scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := f.store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	if _, _, err := f.store.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ChargeRunning(ctx, fence, itemstore.Charge{Template: "t1", Spend: workitems.Spend{WallTime: workitems.Duration(12 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	stale := *fence
	stale.Epoch--
	if _, err := f.store.ChargeRunning(ctx, &stale, itemstore.Charge{Template: "t1", Spend: workitems.Spend{WallTime: workitems.Duration(time.Hour)}}); err == nil {
		t.Fatal("a stale fence charged")
	}
	code, m := f.do(t, "GET", "/api/items/"+it.ID, "", "")
	rs, _ := m["running_spend"].(map[string]any)
	if code != 200 || rs["wall_time"] != "12s" {
		t.Fatalf("running item view: %d running_spend %v", code, m["running_spend"])
	}
}
