package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"outerloop/workitems"
)

// ErrScriptExhausted means a scripted or replay provider got more requests than it has steps.
var ErrScriptExhausted = errors.New("model script exhausted")

// ScriptStep is one scripted reply. Exactly one of Response, Err and Func says what the step
// returns; Block makes the step wait for the request's context to end instead.
type ScriptStep struct {
	Response *Response
	Err      error
	// Func computes the reply from the request (and may itself watch ctx).
	Func func(ctx context.Context, req Request) (*Response, error)
	// Deltas are streamed to onDelta, in order, before the step returns.
	Deltas []string
	// Block waits until ctx is done and returns its error, like a stalled stream; it is how
	// tests cancel during sampling.
	Block bool
	// Started, when set, is closed as the step begins (after the request was recorded), so a
	// test can act while the model is "streaming". Use a fresh channel per step.
	Started chan struct{}
}

// Reply is a step returning r.
func Reply(r *Response) ScriptStep { return ScriptStep{Response: r} }

// Fail is a step returning err.
func Fail(err error) ScriptStep { return ScriptStep{Err: err} }

// Do is a step computing its reply with f.
func Do(f func(ctx context.Context, req Request) (*Response, error)) ScriptStep {
	return ScriptStep{Func: f}
}

// TextResponse is a final assistant answer (EndTurn true).
func TextResponse(text string) *Response {
	return &Response{Items: []Item{{Kind: KindMessage, Role: RoleAssistant, Text: text}}, EndTurn: true}
}

// CallResponse is a response made of function calls (EndTurn false).
func CallResponse(calls ...Item) *Response {
	return &Response{Items: slices.Clone(calls)}
}

// Call is a function-call item.
func Call(callID, name, arguments string) Item {
	return Item{Kind: KindFunctionCall, CallID: callID, Name: name, Arguments: arguments}
}

// Scripted is a Provider that plays ScriptSteps in order and records every request it got.
// It is safe for concurrent use.
type Scripted struct {
	name string

	mu       sync.Mutex
	steps    []ScriptStep
	next     int
	requests []Request
}

// NewScripted returns a provider playing steps in order; a request past the last step fails
// with an invariant_violation *Error wrapping ErrScriptExhausted.
func NewScripted(name string, steps ...ScriptStep) *Scripted {
	return &Scripted{name: name, steps: slices.Clone(steps)}
}

// Name returns the provider's name.
func (s *Scripted) Name() string { return s.name }

// Add appends steps to the script.
func (s *Scripted) Add(steps ...ScriptStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Requests returns deep copies of every request received so far, in order.
func (s *Scripted) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = CloneRequest(r)
	}
	return out
}

// Remaining returns how many steps are left.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps) - s.next
}

// Stream records req and plays the next step.
func (s *Scripted) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("model %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.requests = append(s.requests, CloneRequest(req))
	if s.next >= len(s.steps) {
		n := len(s.requests)
		s.mu.Unlock()
		return nil, &Error{Provider: s.name, Class: workitems.ClassInvariantViolation,
			Message: fmt.Sprintf("request %d has no scripted reply", n), Err: ErrScriptExhausted}
	}
	step := s.steps[s.next]
	s.next++
	s.mu.Unlock()

	if step.Started != nil {
		close(step.Started)
	}
	for _, d := range step.Deltas {
		if onDelta != nil {
			onDelta(Delta{Text: d})
		}
	}
	switch {
	case step.Block:
		<-ctx.Done()
		return nil, fmt.Errorf("model %s: %w", s.name, ctx.Err())
	case step.Func != nil:
		r, err := step.Func(ctx, CloneRequest(req))
		if err != nil {
			return nil, err
		}
		return cloneResponse(r), nil
	case step.Err != nil:
		return nil, step.Err
	case step.Response != nil:
		return cloneResponse(step.Response), nil
	}
	return nil, &Error{Provider: s.name, Class: workitems.ClassInvariantViolation,
		Message: "scripted step has no reply", Err: ErrScriptExhausted}
}

// CloneRequest returns a deep copy of r.
func CloneRequest(r Request) Request {
	out := r
	out.Input = cloneItems(r.Input)
	if r.Tools != nil {
		out.Tools = make([]Tool, len(r.Tools))
		for i, t := range r.Tools {
			t.Parameters = cloneRaw(t.Parameters)
			out.Tools[i] = t
		}
	}
	return out
}

func cloneResponse(r *Response) *Response {
	if r == nil {
		return nil
	}
	out := *r
	out.Items = cloneItems(r.Items)
	return &out
}

func cloneItems(items []Item) []Item {
	if items == nil {
		return nil
	}
	out := make([]Item, len(items))
	for i, it := range items {
		it.Raw = cloneRaw(it.Raw)
		out[i] = it
	}
	return out
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}
