package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"outerloop/proc"
	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// stateVersion is bumped when state changes incompatibly.
const stateVersion = 1

// pendingCall is one entry of the tool-call ledger: a call of the last response without a
// recorded output yet.
type pendingCall struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Started   bool   `json:"started,omitempty"` // it may have had effects
}

// state is the checkpointed control state; history is stored separately, append-only.
type state struct {
	Version    int             `json:"version"`
	Phase      Phase           `json:"phase"`
	Step       int64           `json:"step"`
	Turn       string          `json:"turn"`
	HistoryLen int             `json:"history_len"`
	GoalLen    int             `json:"goal_len"`   // leading items every request view keeps
	ViewStart  int             `json:"view_start"` // first item after the last compaction summary
	Samplings  int             `json:"samplings"`
	Pending    []pendingCall   `json:"pending,omitempty"`
	ModelMore  bool            `json:"model_follow_up,omitempty"`
	Input      []string        `json:"pending_input,omitempty"` // steer input not yet in history
	HoldInput  bool            `json:"hold_input,omitempty"`    // drain gate after compaction
	HookActive bool            `json:"stop_hook_active,omitempty"`
	LastBlock  string          `json:"last_block,omitempty"` // the last continuation the stop hooks gave
	Tools      []string        `json:"tools,omitempty"`      // tools offered by the last request
	StartPrint string          `json:"start_print,omitempty"`
	CheckPrint string          `json:"check_print,omitempty"` // workspace at the last done check
	Checked    bool            `json:"checked,omitempty"`
	NagPrint   string          `json:"nag_print,omitempty"` // workspace when the built-in hook last blocked
	Failures   map[string]int  `json:"failures,omitempty"`
	WrappedUp  map[string]bool `json:"wrapped_up,omitempty"`
	CtxTokens  int64           `json:"context_tokens"`
	CtxFull    bool            `json:"context_full,omitempty"`
	LastText   string          `json:"last_message,omitempty"`
	Spend      workitems.Spend `json:"spend"`
	Exit       *workitems.Exit `json:"exit,omitempty"`
}

// runtime holds everything one Run owns; the phase is only st.Phase.
type runtime struct {
	l        *Loop
	a        *worker.Attempt
	log      *slog.Logger
	provider model.Provider
	prices   model.Prices
	modelID  string
	tools    *toolbox
	st       state
	history  []model.Item
	unsaved  []model.Item // appended since the last save
	resumed  bool
	stopped  bool // lease lost: write nothing more
}

func (l *Loop) newRuntime(ctx context.Context, a *worker.Attempt) (*runtime, error) {
	if a.Template == nil || a.Meter == nil || a.Checkpoints == nil {
		return nil, workitems.Classify(workitems.ClassInvalidInput, errors.New("attempt needs a template, a meter and a checkpointer"))
	}
	rt := &runtime{l: l, a: a, log: a.Logger}
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	name := a.Template.Loop.Provider
	var pcfg config.ProviderConfig
	if a.Config != nil {
		pcfg = a.Config.Providers[name]
	}
	p, err := l.providers(pcfg, name)
	if err != nil {
		return nil, workitems.Classify(workitems.ClassInvalidInput, fmt.Errorf("provider %q: %w", name, err))
	}
	rt.provider, rt.prices, rt.modelID = p, pcfg.Prices, a.Condition.Strategy.Model
	tb, err := newToolbox(a.Workspace, a.DoneCheck != nil, l.shellEnv, a.Condition.Env, l.lookupEnv)
	if err != nil {
		return nil, workitems.Classify(workitems.ClassInvalidInput, err)
	}
	rt.tools = tb
	tb.runner, tb.policy, tb.key = a.Runner, a.Policy(proc.DefaultToolNetwork), a.ProcKey()
	tb.doneCheck = rt.runDoneCheck
	tb.progress, tb.progressEvery = rt.shellProgress(ctx), l.progressEvery
	tb.limited = rt.limitEvent(ctx)
	if err := rt.load(ctx); err != nil {
		tb.root.Close()
		return nil, err
	}
	return rt, nil
}

// load restores state and history from the last checkpoint, or starts a fresh turn.
func (rt *runtime) load(ctx context.Context) error {
	a := rt.a
	raw, hist, err := a.Checkpoints.Load(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &rt.st); err != nil {
			return workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("checkpoint state: %w", err))
		}
		if rt.st.Version != stateVersion {
			return workitems.Classify(workitems.ClassInvariantViolation,
				fmt.Errorf("checkpoint state version %d, this loop reads %d", rt.st.Version, stateVersion))
		}
		for i, h := range hist {
			var it model.Item
			if err := json.Unmarshal(h, &it); err != nil {
				return workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("checkpoint history entry %d: %w", i, err))
			}
			rt.history = append(rt.history, it)
		}
		if len(rt.history) != rt.st.HistoryLen {
			return workitems.Classify(workitems.ClassInvariantViolation,
				fmt.Errorf("checkpoint has %d history entries, state expects %d", len(rt.history), rt.st.HistoryLen))
		}
		rt.resumed = true
		return nil
	}
	rt.st = state{Version: stateVersion, Phase: Preparing, Turn: turnID(a),
		Failures: map[string]int{}, WrappedUp: map[string]bool{}}
	rt.st.StartPrint = fingerprint(a.Workspace)
	return nil
}

func turnID(a *worker.Attempt) string {
	id := "turn"
	if a.Item != nil {
		id = a.Item.ID
	}
	return id + "/" + strconv.Itoa(a.N)
}

// append records items in history; they are written with the next save.
func (rt *runtime) append(items ...model.Item) {
	rt.history = append(rt.history, items...)
	rt.unsaved = append(rt.unsaved, items...)
}

// view is the request input: the goal, then everything since the last compaction.
func (rt *runtime) view() []model.Item {
	v := append([]model.Item(nil), rt.history[:rt.st.GoalLen]...)
	start := max(rt.st.ViewStart, rt.st.GoalLen)
	return append(v, rt.history[start:]...)
}

// errLeaseLost stops the run without another write.
var errLeaseLost = errors.New("agentloop: lease lost")

// save writes the state and the unsaved history in one fenced write.
func (rt *runtime) save(ctx context.Context) error {
	if rt.stopped {
		return errLeaseLost
	}
	rt.st.Step++
	rt.st.Spend = rt.a.Meter.Spent()
	rt.st.HistoryLen = len(rt.history)
	raw, err := json.Marshal(rt.st)
	if err != nil {
		return workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("encode state: %w", err))
	}
	entries := make([][]byte, len(rt.unsaved))
	for i, it := range rt.unsaved {
		if entries[i], err = json.Marshal(it); err != nil {
			return workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("encode history: %w", err))
		}
	}
	// A checkpoint is written even when the run is being cancelled: it is how an abort is kept.
	// While the run lives, a failed write is retried without a bound (a Redis blip pauses the
	// loop; only a lost lease ends it); once it is cancelled, for 10 s more.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(10*time.Second, cancel) })
	defer stop()
	if err := rt.a.Checkpoints.Save(wctx, raw, entries...); err != nil {
		if errors.Is(err, workitems.ErrLeaseLost) {
			rt.stopped = true
			return fmt.Errorf("%w: %w", errLeaseLost, err)
		}
		rt.st.Step-- // nothing was written
		return workitems.Classify(workitems.ClassTransient, fmt.Errorf("save checkpoint: %w", err))
	}
	rt.unsaved = rt.unsaved[:0]
	return nil
}

// enter moves the machine to phase to and checkpoints.
func (rt *runtime) enter(ctx context.Context, to Phase) error {
	if err := Transition(rt.st.Phase, to); err != nil {
		return workitems.Classify(workitems.ClassInvariantViolation, err)
	}
	prev := rt.st.Phase
	rt.st.Phase = to
	// Steps are charged, not refused here: the next spending action checks the meter.
	_ = rt.a.Meter.Add(workitems.Spend{Steps: 1})
	if err := rt.save(ctx); err != nil {
		if !errors.Is(err, errLeaseLost) {
			rt.st.Phase = prev // nothing was written; the machine has not moved
		}
		return err
	}
	return nil
}

func (rt *runtime) emit(ctx context.Context, kind workitems.EventKind, msg string, data map[string]string) {
	if rt.stopped {
		return
	}
	if data == nil {
		data = map[string]string{}
	}
	data["turn"] = rt.st.Turn
	emit(ctx, rt.a, kind, msg, data)
}
