package worker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"outerloop/egress"
	"outerloop/proc"
	"outerloop/workitems"
)

type eventList struct {
	mu  sync.Mutex
	evs []workitems.Event
}

func (l *eventList) Emit(_ context.Context, e workitems.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Attempt = 1
	l.evs = append(l.evs, e)
}

// refusalCounts is an Observer that keeps NetworkRefused's counts by reason.
type refusalCounts struct {
	nopObserver
	mu sync.Mutex
	n  map[string]int
}

func (o *refusalCounts) NetworkRefused(template, reason string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[template+"/"+reason] += n
}

// Each report of a refusal leaves a network_refused event naming its destination, reason,
// command and count, and the metric adds the count: one refusal reported as it happened, the
// counts a command's end reports, per destination and for the destinations past them, and a
// request in origin form.
func TestEveryRefusalReportLeavesAnEventWithItsCountAndIsCounted(t *testing.T) {
	t.Parallel()
	obs := &refusalCounts{n: map[string]int{}}
	h := &Handler{o: HandlerOptions{Observer: obs}}
	events := &eventList{}
	record := h.networkRefused("nightly", events)
	meta := egress.Refusal{Host: "169.254.169.254", Port: 80, Reason: egress.ReasonPrivateAddress}
	record(proc.NetworkRefusal{Refusal: egress.Refusal{Host: "github.com", Port: 443, Reason: egress.ReasonNotAllowed}, Command: "go get", Count: 1})
	record(proc.NetworkRefusal{Refusal: meta, Command: "go get", Count: 7, Counted: true})
	record(proc.NetworkRefusal{Refusal: egress.Refusal{Reason: egress.ReasonNotAllowed}, Command: "go get", Count: 300, Counted: true, Others: true})
	record(proc.NetworkRefusal{Refusal: egress.Refusal{Host: "127.0.0.1", Port: 41234, Reason: egress.ReasonOriginForm}, Command: "curl $HTTP_PROXY/x", Count: 1})

	want := []map[string]string{
		{"kind": string(workitems.KindNetworkRefused), "host": "github.com", "port": "443", "reason": "not_allowed", "command": "go get", "count": "1"},
		{"kind": string(workitems.KindNetworkRefused), "host": "169.254.169.254", "port": "80", "reason": "private_address", "command": "go get", "count": "7", "counted": "true"},
		{"kind": string(workitems.KindNetworkRefused), "host": "", "port": "", "reason": "not_allowed", "command": "go get", "count": "300", "counted": "true", "others": "true"},
		{"kind": string(workitems.KindNetworkRefused), "host": "127.0.0.1", "port": "41234", "reason": "origin_form", "command": "curl $HTTP_PROXY/x", "count": "1"},
	}
	if len(events.evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events.evs), len(want), events.evs)
	}
	for i, e := range events.evs {
		if e.Type != workitems.EventStep || fmt.Sprint(e.Data) != fmt.Sprint(want[i]) {
			t.Errorf("event %d: %s %v\nwant data %v", i, e.Type, e.Data, want[i])
		}
	}
	for i, part := range []string{"github.com:443", "169.254.169.254:80 7 time(s)", "300 connection(s) to other destinations", "origin form"} {
		if !strings.Contains(events.evs[i].Message, part) {
			t.Errorf("event %d says %q, want it to say %q", i, events.evs[i].Message, part)
		}
	}
	if wantN := map[string]int{"nightly/not_allowed": 301, "nightly/private_address": 7, "nightly/origin_form": 1}; fmt.Sprint(obs.n) != fmt.Sprint(wantN) {
		t.Errorf("metric counts %v, want %v", obs.n, wantN)
	}

	// The pull request's list names each destination once, the counted metadata address
	// included, and the destinations past those counted one by one by their reason.
	got := refusedList(events.evs, 1)
	wantList := []string{"github.com:443 (not_allowed)", "169.254.169.254:80 (private_address)", "other destinations (not_allowed)", "127.0.0.1:41234 (origin_form)"}
	if !slices.Equal(got, wantList) {
		t.Errorf("listed %q, want %q", got, wantList)
	}
}

// The pull request's list is bounded, and says when there was more than it lists.
func TestTheListOfRefusedDestinationsSaysWhenItIsCut(t *testing.T) {
	t.Parallel()
	events := &eventList{}
	record := (&Handler{o: HandlerOptions{Observer: nopObserver{}}}).networkRefused("nightly", events)
	for i := range maxRefusedListed + 3 {
		record(proc.NetworkRefusal{Refusal: egress.Refusal{Host: fmt.Sprintf("h%d.example", i), Port: 443, Reason: egress.ReasonNotAllowed}, Command: "c", Count: 1})
	}
	got := refusedList(events.evs, 1)
	if len(got) != maxRefusedListed+1 || got[0] != "h0.example:443 (not_allowed)" || !strings.Contains(got[maxRefusedListed], "3 further") {
		t.Fatalf("listed %q", got)
	}
	if other := refusedList(events.evs, 2); len(other) != 0 {
		t.Fatalf("attempt 2 lists %q", other)
	}
}
