package verify

import (
	"slices"
	"testing"
	"time"

	"outerloop/workitems"
)

// TestEveryRuleNameIsDecidedByTheTableOrListedOutsideIt keeps workitems.AllRuleNames equal to
// what decides: every row and guard of the table and every row of the person table is listed,
// and every listed name is one of those or of workitems.RulesOutsideThePolicy (and only one).
// A new row that is not listed, or a listed name nothing decides, fails here.
func TestEveryRuleNameIsDecidedByTheTableOrListedOutsideIt(t *testing.T) {
	t.Parallel()
	all := workitems.AllRuleNames()
	seen := map[workitems.RuleName]string{}
	decide := func(name workitems.RuleName, by string) {
		if prev, ok := seen[name]; ok {
			t.Errorf("%s is decided twice: as %s and as %s", name, prev, by)
		}
		seen[name] = by
		if !slices.Contains(all, name) {
			t.Errorf("%s %s is not in workitems.AllRuleNames", by, name)
		}
	}
	for _, r := range Rules() {
		decide(r.Name, "the row")
	}
	for _, g := range Guards() {
		decide(g.Name, "the guard")
	}
	for _, r := range PersonRules() {
		decide(r.Name, "the person row")
	}
	for _, n := range workitems.RulesOutsideThePolicy() {
		decide(n, "the rule outside the table")
	}
	for i, n := range all {
		if slices.Contains(all[:i], n) {
			t.Errorf("workitems.AllRuleNames lists %s twice", n)
		}
		if _, ok := seen[n]; !ok {
			t.Errorf("workitems.AllRuleNames lists %s, which no row or guard decides and RulesOutsideThePolicy does not list", n)
		}
	}
}

// TestEveryConfigChangeReasonIsDecidedByItsPreconditionRow: the worker hands a config change's
// reason to the table as a precondition (ConfigChangeReason.Rule), and the row of that name
// decides it.
func TestEveryConfigChangeReasonIsDecidedByItsPreconditionRow(t *testing.T) {
	t.Parallel()
	for _, reason := range workitems.AllConfigChangeReasons() {
		f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Now: time.Unix(0, 0),
			Precondition: &Precondition{Rule: reason.Rule(), Summary: string(reason)}}
		if d := decide(f); d.Rule != reason.Rule() || d.Outcome != workitems.OutcomeEscalate {
			t.Errorf("config change %s: decided %s by %s, want an escalation by %s", reason, d.Outcome, d.Rule, reason.Rule())
		}
	}
}

// TestTheVerifierNamesItselfTheVerifier: the table's decisions carry the verifier's actor,
// which counts as the verifier's kind.
func TestTheVerifierNamesItselfTheVerifier(t *testing.T) {
	t.Parallel()
	d := decide(&Facts{Exit: workitems.Exit{Reason: workitems.ExitFailed}, Now: time.Unix(0, 0)})
	if d.Actor != workitems.ActorVerifierName || d.Kind() != workitems.ActorVerifier {
		t.Errorf("actor %q of kind %s, want %q of kind %s", d.Actor, d.Kind(), workitems.ActorVerifierName, workitems.ActorVerifier)
	}
}
