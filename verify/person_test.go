package verify

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
)

// TestEverySignalInEveryStateIsDecidedOrRefusedByItsRow walks the whole person table: each
// signal against an item in each state, the resolution it records or the refusal, so an edge
// added or dropped fails here.
func TestEverySignalInEveryStateIsDecidedOrRefusedByItsRow(t *testing.T) {
	t.Parallel()
	type want struct {
		action workitems.ResolutionAction
		rule   workitems.RuleName
	}
	retry := want{workitems.ResolveRetry, workitems.RulePersonRetry}
	rebase := want{workitems.ResolveRetry, workitems.RulePersonRebase}
	cancel := want{workitems.ResolveCancel, workitems.RulePersonCancel}
	table := map[PersonSignal]map[workitems.State]want{
		SignalRetry:  {workitems.StateWaiting: retry, workitems.StateEscalated: retry},
		SignalRebase: {workitems.StateWaiting: rebase, workitems.StateEscalated: rebase},
		SignalCancel: {workitems.StateQueued: cancel, workitems.StateRunning: cancel, workitems.StateVerifying: cancel,
			workitems.StateWaiting: cancel, workitems.StateRetryWait: cancel, workitems.StateEscalated: cancel},
		SignalMerged: {workitems.StateEscalated: {workitems.ResolveClose, workitems.RulePersonMerged}},
		SignalClosed: {workitems.StateEscalated: {workitems.ResolveCancel, workitems.RulePersonClosed}},
	}
	for _, sig := range AllPersonSignals() {
		for _, st := range workitems.AllStates() {
			f := PersonFacts{Signal: sig, Item: &workitems.Item{ID: "it1", State: st}, Actor: "gitea:ann", User: "ann", PR: 7, Text: "use v2"}
			r, err := DecidePerson(f)
			w, acts := table[sig][st]
			if !acts {
				var refused *PersonRefusedError
				if !errors.As(err, &refused) || refused.State != st || refused.Signal != sig {
					t.Errorf("%s on a %s item: %+v, %v; want a refusal naming the state", sig, st, r, err)
				} else if !strings.Contains(err.Error(), string(st)) {
					t.Errorf("%s on a %s item: the refusal %q does not name the state", sig, st, err)
				}
				continue
			}
			if err != nil || r.Action != w.action || r.Rule != w.rule || r.Actor != "gitea:ann" {
				t.Errorf("%s on a %s item: %+v, %v; want %s by %s as gitea:ann", sig, st, r, err, w.action, w.rule)
			}
		}
	}
}

// TestAPersonsRetryCarriesTheirWordsAndTheirPullRequest: a retry's input names who asked, on
// which pull request, and what they wrote; a rebase says to start again from the base.
func TestAPersonsRetryCarriesTheirWordsAndTheirPullRequest(t *testing.T) {
	t.Parallel()
	it := &workitems.Item{ID: "it1", State: workitems.StateEscalated}
	r, err := DecidePerson(PersonFacts{Signal: SignalRetry, Item: it, Actor: "gitea:ann", User: "ann", PR: 7, Text: "  pin the old API  "})
	if err != nil || r.Input != "ann asked for a retry on pull request #7.\n\npin the old API" {
		t.Errorf("retry input %q, %v", r.Input, err)
	}
	r, err = DecidePerson(PersonFacts{Signal: SignalRebase, Item: it, Actor: "gitea:ann", User: "ann", PR: 7})
	if err != nil || !strings.HasPrefix(r.Input, "ann asked for a rebase on pull request #7. The attempt starts from the base branch") {
		t.Errorf("rebase input %q, %v", r.Input, err)
	}
	r, err = DecidePerson(PersonFacts{Signal: SignalMerged, Item: it, Actor: "gitea:bob", User: "bob", PR: 9})
	if err != nil || r.Input != "pull request #9 was merged on the forge" {
		t.Errorf("merged input %q, %v", r.Input, err)
	}
	if _, err := DecidePerson(PersonFacts{Signal: "approve", Item: it}); err == nil || !strings.Contains(err.Error(), `"approve"`) {
		t.Errorf("an unknown signal: %v, want an error naming it", err)
	}
}

// TestEveryPersonRowTakesAnEdgeTheStoreHas: the table decides, the store enforces; a row that
// named a state its transition does not start from, or a resolution its transition does not
// take, would be refused by the store every time.
func TestEveryPersonRowTakesAnEdgeTheStoreHas(t *testing.T) {
	t.Parallel()
	opOf := map[workitems.ResolutionAction]workitems.Op{
		workitems.ResolveClose: workitems.OpResolveClose, workitems.ResolveRetry: workitems.OpResolveRetry,
		workitems.ResolveCancel: workitems.OpCancel,
	}
	var signals []PersonSignal
	for _, r := range PersonRules() {
		signals = append(signals, r.Signal)
		if opOf[r.Action] != r.Op {
			t.Errorf("%s resolves %s but names the store's %s", r.Name, r.Action, r.Op)
		}
		if len(r.States) == 0 {
			t.Errorf("%s acts in no state", r.Name)
		}
		for _, st := range r.States {
			if !r.Op.From(st) {
				t.Errorf("%s acts on a %s item, which %s does not start from (%v)", r.Name, st, r.Op, r.Op.Sources())
			}
		}
	}
	if !slices.Equal(signals, AllPersonSignals()) {
		t.Errorf("the rows' signals %v, want one row per signal in order %v", signals, AllPersonSignals())
	}
	for _, verb := range []string{"retry", "rebase", "cancel"} {
		if s, ok := CommandSignal(verb); !ok || string(s) != verb {
			t.Errorf("CommandSignal(%q) = %q, %v", verb, s, ok)
		}
	}
	for _, verb := range []string{"merged", "closed", "approve", ""} {
		if _, ok := CommandSignal(verb); ok {
			t.Errorf("CommandSignal(%q) is a command", verb)
		}
	}
}
