package model

import (
	"context"
	"errors"
	"testing"
	"time"

	"outerloop/workitems"
)

func TestInstrumentReportsLatencyAndErrorClass(t *testing.T) {
	var got []string
	obs := func(provider string, d time.Duration, class string) { got = append(got, provider+":"+class) }
	s := NewScripted("p", Reply(TextResponse("hi")), Fail(&Error{Provider: "p", Class: workitems.ClassTransient}))
	p := Instrument(s, obs)
	if _, err := p.Stream(context.Background(), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stream(context.Background(), Request{}, nil); err == nil {
		t.Fatal("want the scripted error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked := NewScripted("p", ScriptStep{Block: true})
	if _, err := Instrument(blocked, obs).Stream(ctx, Request{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if len(got) != 2 || got[0] != "p:" || got[1] != "p:transient" {
		t.Fatalf("observed %v", got)
	}
	if Instrument(s, nil) != Provider(s) {
		t.Fatal("no observer: the provider itself")
	}
}
