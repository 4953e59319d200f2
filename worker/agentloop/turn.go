package agentloop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
)

// Texts the loop writes into history.
const (
	interruptedMarker = "<turn_aborted>The turn was interrupted before it finished. Tool calls " +
		"without an output did not complete.</turn_aborted>"
	outputAborted      = "aborted: the turn was cancelled while this call ran; its effects are unknown"
	outputNotRun       = "aborted: the turn ended before this call ran"
	outputInterrupted  = "interrupted; outcome unknown: the worker stopped while this call ran. It was not re-run; check its effects before repeating it."
	builtinHookPrompt  = "Files in the workspace changed since the last done check. Run run_done_check and look at its result before you finish."
	defaultInstruction = "You are a careful software engineer working in a repository checkout (the workspace). " +
		"Use the tools to inspect and change files; paths are relative to the workspace. " +
		"Check your work with run_done_check when it is available. When you are done, answer with a short summary of what you changed and why."
)

// endError ends the turn through ErrorClosing with a prepared exit.
type endError struct{ exit workitems.Exit }

func (e *endError) Error() string {
	return fmt.Sprintf("agentloop: %s: %s", e.exit.Reason, e.exit.Message)
}

// run is the turn wrapper: one turn_started, the phase machine, one terminal event.
func (rt *runtime) run(ctx context.Context) workitems.Exit {
	if rt.resumed {
		switch rt.st.Phase {
		case Completed:
			if rt.st.Exit != nil {
				return *rt.st.Exit // the attempt already finished; nothing to redo
			}
		case Aborted, ErrorClosing:
			// A resumed attempt picks the turn up again; this is a resume point, not an edge.
			rt.st.Phase, rt.st.Exit = Preparing, nil
		}
	}
	rt.emit(ctx, workitems.KindTurnStarted, "turn started", map[string]string{
		"resumed": strconv.FormatBool(rt.resumed), "step": strconv.FormatInt(rt.st.Step, 10),
		"phase": string(rt.st.Phase)})
	if rt.resumed && rt.st.Phase == JoiningTools {
		rt.markInterrupted()
	}
	for {
		if err := ctx.Err(); err != nil {
			return rt.finish(ctx, err)
		}
		var err error
		switch rt.st.Phase {
		case Preparing:
			err = rt.prepare(ctx)
		case Sampling:
			err = rt.sample(ctx)
		case JoiningTools:
			err = rt.join(ctx)
		case Deciding:
			err = rt.decide(ctx)
		case Compacting:
			err = rt.compact(ctx)
		case StopGate:
			err = rt.stopGate(ctx)
		default:
			err = workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("agentloop: no handler for phase %q", rt.st.Phase))
		}
		if err != nil {
			return rt.finish(ctx, err)
		}
		if rt.st.Phase.Terminal() {
			return *rt.st.Exit
		}
	}
}

// markInterrupted gives every started call of the ledger its "outcome unknown" output.
func (rt *runtime) markInterrupted() {
	var rest []pendingCall
	for _, c := range rt.st.Pending {
		if c.Started {
			rt.append(model.Item{Kind: model.KindFunctionCallOutput, CallID: c.CallID, Output: outputInterrupted})
			continue
		}
		rest = append(rest, c)
	}
	rt.st.Pending = rest
}

// finish ends the turn after err: nothing at all when the lease is lost, Aborted on
// cancellation, ErrorClosing otherwise.
func (rt *runtime) finish(ctx context.Context, err error) workitems.Exit {
	if errors.Is(err, errLeaseLost) || rt.stopped {
		rt.log.Warn("agentloop: lease lost; stopping without writing", "err", err)
		return leaseLostExit()
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errWallTime) {
			return rt.closeWith(ctx, workitems.Exit{Reason: workitems.ExitBudgetExhausted,
				Budget: workitems.BudgetWallTime, Message: "wall-time budget reached"})
		}
		return rt.abort(ctx)
	}
	var ee *endError
	var be *worker.BudgetError
	var me *model.Error
	switch {
	case errors.As(err, &ee):
		return rt.closeWith(ctx, ee.exit)
	case errors.As(err, &be):
		return rt.closeWith(ctx, workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: be.Kind, Message: be.Error()})
	case errors.As(err, &me):
		reason := workitems.ExitFailed
		if me.Class == workitems.ClassTransient {
			reason = workitems.ExitTransientError
		}
		if me.ContextWindowExceeded {
			rt.st.CtxFull = true
		}
		return rt.closeWith(ctx, workitems.Exit{Reason: reason, Class: me.Class, Message: me.Error()})
	}
	class := workitems.ClassOf(err)
	reason := workitems.ExitFailed
	if class == workitems.ClassTransient {
		reason = workitems.ExitTransientError
	}
	return rt.closeWith(ctx, workitems.Exit{Reason: reason, Class: class, Message: err.Error()})
}

// closePending gives every call still in the ledger an output, so history stays joined.
func (rt *runtime) closePending(out string) {
	rt.markInterrupted()
	for _, c := range rt.st.Pending {
		rt.append(model.Item{Kind: model.KindFunctionCallOutput, CallID: c.CallID, Output: out})
	}
	rt.st.Pending = nil
}

func (rt *runtime) abort(ctx context.Context) workitems.Exit {
	rt.closePending(outputNotRun)
	rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: interruptedMarker})
	ex := workitems.Exit{Reason: workitems.ExitAborted, Message: "turn cancelled", LastMessage: rt.st.LastText}
	rt.st.Exit = &ex
	if err := rt.enter(ctx, Aborted); errors.Is(err, errLeaseLost) {
		return leaseLostExit()
	}
	rt.emit(ctx, workitems.KindTurnAborted, "turn aborted", map[string]string{"reason": "cancelled"})
	return ex
}

func (rt *runtime) closeWith(ctx context.Context, ex workitems.Exit) workitems.Exit {
	rt.closePending(outputNotRun + ": " + ex.Message)
	ex.LastMessage = rt.st.LastText
	rt.st.Exit = &ex
	if err := rt.enter(ctx, ErrorClosing); errors.Is(err, errLeaseLost) {
		return leaseLostExit()
	}
	rt.emit(ctx, workitems.KindTurnError, ex.Message, map[string]string{"reason": string(ex.Reason),
		"class": string(ex.Class), "budget": string(ex.Budget), "message": ex.Message,
		"context_full": strconv.FormatBool(rt.st.CtxFull)})
	return ex
}

// goal builds the first user message from the item and the attempt's condition.
func (rt *runtime) goal() string {
	var b strings.Builder
	if rt.a.Item != nil && rt.a.Item.Goal != "" {
		b.WriteString(rt.a.Item.Goal)
	} else {
		b.WriteString(rt.a.Template.Goal)
	}
	c := rt.a.Condition
	if c.Strategy.Scope != "" {
		fmt.Fprintf(&b, "\n\nScope: %s", c.Strategy.Scope)
	}
	if c.Strategy.PromptVariant != "" {
		fmt.Fprintf(&b, "\n\nApproach: %s", c.Strategy.PromptVariant)
	}
	if c.Input != "" {
		fmt.Fprintf(&b, "\n\nContext from earlier attempts or a person:\n%s", c.Input)
	}
	return b.String()
}

func (rt *runtime) drainSteer(ctx context.Context) {
	if rt.a.Steer == nil {
		return
	}
	in, err := rt.a.Steer.Drain(ctx)
	if err != nil {
		rt.log.Warn("agentloop: drain steer input", "err", err)
		return
	}
	rt.st.Input = append(rt.st.Input, in...)
}

func (rt *runtime) prepare(ctx context.Context) error {
	if len(rt.history) == 0 {
		rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: rt.goal()})
		rt.st.GoalLen = len(rt.history)
		rt.st.ViewStart = rt.st.GoalLen
	}
	rt.drainSteer(ctx)
	if !rt.st.HoldInput && len(rt.st.Input) > 0 {
		for _, in := range rt.st.Input {
			rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: in})
		}
		rt.st.Input = nil
	}
	if k, near := rt.a.Meter.Near(rt.l.wrapUpAt); near && !rt.st.WrappedUp[string(k)] {
		if rt.st.WrappedUp == nil {
			rt.st.WrappedUp = map[string]bool{}
		}
		rt.st.WrappedUp[string(k)] = true
		msg := fmt.Sprintf("Budget notice: the %s budget is nearly used up (%g of %g). Wrap up: "+
			"finish the most important change, check it, and give your final answer.", k, rt.a.Meter.Spent().Of(k), rt.a.Meter.Budget().Cap(k))
		rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: msg})
		rt.emit(ctx, workitems.KindWarning, msg, map[string]string{"budget": string(k)})
	}
	if err := rt.a.Meter.Allow(worker.ModelKinds()...); err != nil {
		return err
	}
	return rt.enter(ctx, Sampling)
}

func (rt *runtime) instructions() string {
	if s := rt.a.Template.Loop.Instructions; s != "" {
		return s
	}
	return defaultInstruction
}

func (rt *runtime) request() model.Request {
	return model.Request{Model: rt.modelID, Instructions: rt.instructions(), Input: rt.view(), Tools: rt.tools.specs(),
		CacheKey: model.CacheKeyFor(rt.st.Turn)}
}

func (rt *runtime) sample(ctx context.Context) error {
	tools := rt.tools.specs()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	rt.st.Tools = names
	rt.emit(ctx, workitems.KindModelRequest, "model request", map[string]string{
		"sampling": strconv.Itoa(rt.st.Samplings + 1), "step": strconv.FormatInt(rt.st.Step, 10),
		"input_items": strconv.Itoa(len(rt.view())), "tools": strings.Join(names, ",")})
	resp, err := rt.stream(ctx, rt.request)
	if err != nil {
		return err
	}
	rt.st.HoldInput = false
	rt.st.Samplings++
	rt.append(resp.Items...)
	calls := resp.ToolCalls()
	rt.st.Pending = nil
	for _, c := range calls {
		rt.st.Pending = append(rt.st.Pending, pendingCall{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments})
	}
	rt.st.ModelMore = len(calls) > 0 || !resp.EndTurn
	if t := resp.Text(); t != "" {
		rt.st.LastText = t
	}
	rt.st.CtxTokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
	return rt.enter(ctx, JoiningTools)
}

// stream sends one request, retrying transient errors; every try is rebuilt by build from
// recorded history. Each request sent is charged as a model call.
func (rt *runtime) stream(ctx context.Context, build func() model.Request) (*model.Response, error) {
	for n := 0; ; n++ {
		if err := rt.a.Meter.Allow(worker.ModelKinds()...); err != nil {
			return nil, err
		}
		resp, err := rt.provider.Stream(ctx, build(), nil)
		if err == nil {
			u := resp.Usage
			_ = rt.a.Meter.Add(workitems.Spend{ModelCalls: 1, InputTokens: u.InputTokens,
				CachedInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens, CostUSD: model.Cost(rt.prices, u)})
			return resp, nil
		}
		_ = rt.a.Meter.Add(workitems.Spend{ModelCalls: 1})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !model.Retryable(err) || n >= rt.l.maxRetries {
			return nil, err
		}
		delay := model.RetryDelay(n+1, err, rt.l.jitter())
		msg := fmt.Sprintf("reconnecting %d/%d", n+1, rt.l.maxRetries)
		rt.emit(ctx, workitems.KindStreamError, msg, map[string]string{"attempt": strconv.Itoa(n + 1),
			"max": strconv.Itoa(rt.l.maxRetries), "delay": delay.String(), "class": string(workitems.ClassTransient),
			"error": err.Error()})
		if err := rt.l.sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

func (rt *runtime) decide(ctx context.Context) error {
	rt.drainSteer(ctx)
	follow := rt.st.ModelMore || len(rt.st.Input) > 0
	switch {
	case !follow:
		return rt.enter(ctx, StopGate)
	case rt.overLimit():
		return rt.enter(ctx, Compacting)
	}
	return rt.enter(ctx, Preparing)
}

func (rt *runtime) overLimit() bool {
	limit := rt.a.Template.Loop.ContextLimitTokens
	return limit > 0 && rt.st.CtxTokens >= int64(limit)
}
