package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"outerloop/workitems"
)

// The trail of a waiting item, from its events: what it waited for and what woke it.

// trail returns the item's events as "type" or "type:detail" (the delivery's step, what a wait
// is for, what woke it), oldest first.
func trail(t *testing.T, s *sys, id string) []string {
	t.Helper()
	evs, err := s.Store.Events(context.Background(), id, "", 5000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		switch e.Type {
		case workitems.EventDelivery:
			out = append(out, "delivery:"+e.Data["step"])
		case workitems.EventWaiting:
			out = append(out, "waiting:"+e.Data["kind"])
		case workitems.EventWoken:
			out = append(out, "woken:"+e.Data["by"])
		case workitems.EventDecision:
			out = append(out, "decision:"+e.Data["outcome"]+"/"+e.Data["rule"])
		}
	}
	return out
}

// waitsOf returns the item's waiting and woken events only, as "waiting:kind" and "woken:by".
func waitsOf(t *testing.T, s *sys, id string) string {
	t.Helper()
	var out []string
	for _, e := range trail(t, s, id) {
		if strings.HasPrefix(e, "waiting:") || strings.HasPrefix(e, "woken:") {
			out = append(out, e)
		}
	}
	return fmt.Sprint(out)
}
