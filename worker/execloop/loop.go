package execloop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"outerloop/proc"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Loop runs external agents as inner loops. It implements worker.InnerLoop.
type Loop struct {
	lookupEnv func(string) (string, bool)
	bins      map[string]string
	maxLine   int
	// progressEvery paces the running agent's progress events (progress.go).
	progressEvery time.Duration
	// clock reads the running agent's elapsed time for its progress events.
	clock workitems.Clock
}

// Option configures a Loop.
type Option func(*Loop)

// WithLookupEnv sets where the agent's passed-through environment comes from (default
// os.LookupEnv): PATH, HOME, the template's loop.env names and the provider's key variable.
func WithLookupEnv(f func(string) (string, bool)) Option { return func(l *Loop) { l.lookupEnv = f } }

// WithBinary runs path for agent (codex, claude, aider) when the template names no command.
func WithBinary(agent, path string) Option { return func(l *Loop) { l.bins[agent] = path } }

// New returns a Loop.
func New(opts ...Option) *Loop {
	l := &Loop{lookupEnv: os.LookupEnv, bins: map[string]string{}, maxLine: 16 << 20, clock: workitems.SystemClock{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

var _ worker.InnerLoop = (*Loop)(nil)

// State is what the loop checkpoints after every parsed step.
type State struct {
	Agent       string          `json:"agent"`
	Session     string          `json:"session,omitempty"` // the agent's session/thread id
	Offset      int64           `json:"offset"`            // lines parsed, over all runs of the attempt
	Spend       workitems.Spend `json:"spend"`             // charged from the agent's stream
	LastMessage string          `json:"last_message,omitempty"`
	Runs        int             `json:"runs"`                // agent processes started
	Restarted   bool            `json:"restarted,omitempty"` // a resume had to start afresh
}

// historyEntry is appended to the checkpoint history per step.
type historyEntry struct {
	Offset  int64               `json:"offset"`
	Kind    workitems.EventKind `json:"kind"`
	Message string              `json:"message,omitempty"`
	Spend   workitems.Spend     `json:"spend,omitzero"`
}

// Run starts the template's agent in the workspace and turns its output into events, spend
// and checkpoints until it ends, is cancelled (aborted) or reaches a budget (budget_exhausted).
func (l *Loop) Run(ctx context.Context, a *worker.Attempt) workitems.Exit {
	r := &run{l: l, a: a, log: a.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	exit := r.run(ctx)
	exit.Message = r.redact(exit.Message)
	exit.LastMessage = r.redact(exit.LastMessage)
	return exit
}

// run is one Run call.
type run struct {
	l    *Loop
	a    *worker.Attempt
	log  *slog.Logger
	drv  driver
	st   State
	p    parser
	pgid int
	// policy is the agent's sandbox (network host unless the template says none).
	policy proc.Policy
	// secrets are values that must not reach events, checkpoints or the exit: the provider
	// key and the passed-through variables' values (an agent may print its environment).
	secrets []string
}

// minSecret is the shortest passed-through value treated as a secret ("1" is not one).
const minSecret = 8

func (r *run) addSecret(v string) {
	if len(v) >= minSecret {
		r.secrets = append(r.secrets, v)
	}
}

// redact replaces every secret in s.
func (r *run) redact(s string) string {
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

func (r *run) emit(ctx context.Context, typ workitems.EventType, kind workitems.EventKind, msg string, data map[string]string) {
	if r.a.Events == nil {
		return
	}
	d := map[string]string{"kind": string(kind), "agent": r.drv.name}
	for k, v := range data {
		d[k] = r.redact(v)
	}
	r.a.Events.Emit(ctx, workitems.Event{Type: typ, Message: r.redact(msg), Data: d})
}

func failed(class workitems.ErrorClass, format string, args ...any) workitems.Exit {
	return workitems.Exit{Reason: workitems.ExitFailed, Class: class, Message: fmt.Sprintf(format, args...)}
}

func (r *run) run(ctx context.Context) workitems.Exit {
	lc := r.a.Template.Loop
	drv, ok := drivers()[lc.Agent]
	if !ok {
		return failed(workitems.ClassInvalidInput, "execloop: template %q: agent %q is not one of %s",
			r.a.Template.Name, lc.Agent, strings.Join(agentNames(), ", "))
	}
	r.drv = drv
	r.st = State{Agent: drv.name}
	if r.a.Resumed && r.a.Checkpoints != nil {
		raw, _, err := r.a.Checkpoints.Load(ctx)
		if err != nil {
			return r.checkpointFailure(err, "load")
		}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &r.st); err != nil || r.st.Agent != drv.name {
				r.log.Warn("execloop: checkpoint unusable; starting afresh", "agent", drv.name, "err", err)
				r.st = State{Agent: drv.name, Offset: r.st.Offset}
			}
		}
	}

	for _, name := range lc.Env {
		if v, ok := r.l.lookupEnv(name); ok {
			r.addSecret(v)
		}
	}
	for _, v := range r.a.Condition.Env {
		r.addSecret(v)
	}
	r.policy = r.a.Policy(proc.DefaultAgentNetwork)
	if filepath.IsAbs(r.a.Workspace) {
		// The agent's home (its sessions, for resume) is kept beside the workspace.
		r.policy = r.policy.WithHome()
	}
	inv, exit, ok := r.invocation(ctx)
	if !ok {
		return exit
	}
	r.addSecret(inv.APIKey)
	if ctx.Err() != nil {
		return workitems.Exit{Reason: workitems.ExitAborted, Message: "cancelled before the agent started"}
	}
	if err := r.a.Meter.Check(); err != nil {
		return budgetExit(err, "")
	}
	return r.execute(ctx, inv)
}

// invocation builds the command line inputs: prompt, model, provider and key, caps, resume.
func (r *run) invocation(ctx context.Context) (invocation, workitems.Exit, bool) {
	a := r.a
	lc := a.Template.Loop
	inv := invocation{UserArgs: lc.Args, Workspace: a.Workspace, Model: a.Condition.Strategy.Model,
		Sandboxed: a.Runner.ModeFor(r.policy) == proc.ModeBwrap}
	if lc.Provider != "" {
		if a.Config == nil {
			return inv, failed(workitems.ClassInvalidInput, "execloop: template %q: loop.provider %q given but no config", a.Template.Name, lc.Provider), false
		}
		p, ok := a.Config.Providers[lc.Provider]
		if !ok {
			return inv, failed(workitems.ClassInvalidInput, "execloop: template %q: loop.provider %q is not in providers", a.Template.Name, lc.Provider), false
		}
		inv.Provider = &p
		if inv.Model == "" {
			inv.Model = p.Model
		}
		if p.APIKeyEnv != "" {
			key, ok := r.l.lookupEnv(p.APIKeyEnv)
			if !ok || key == "" {
				return inv, failed(workitems.ClassPermission, "execloop: provider %q: environment variable %s is not set", lc.Provider, p.APIKeyEnv), false
			}
			inv.APIKey = key
		}
	}
	inv.MaxTurns = turnsCap(a.Meter.Remaining(workitems.BudgetModelCalls))
	inv.MaxUSD = a.Meter.Remaining(workitems.BudgetCostUSD)

	switch {
	case a.Resumed && r.st.Session != "" && r.drv.resumable:
		inv.Resume = r.st.Session
		inv.Prompt = "Your previous run on this task was interrupted. Continue where you left off.\n\nTask: " + goalOf(a)
		if c := a.Condition.Input; c != "" {
			inv.Prompt += "\n\n" + c
		}
		r.emit(ctx, workitems.EventStep, workitems.KindResumed, "resuming "+r.drv.name+" session "+r.st.Session,
			map[string]string{"session": r.st.Session})
	case a.Resumed && r.st.Runs > 0:
		// Nothing to resume from (no session id recorded, or the agent cannot resume): start
		// afresh and say so; the condition records it.
		r.st.Restarted = true
		a.Condition.Restarted = true
		inv.Prompt = prompt(a)
		r.emit(ctx, workitems.EventStep, workitems.KindRestarted, r.drv.name+" cannot resume this attempt; starting a fresh run",
			map[string]string{"restarted": "true"})
	default:
		inv.Prompt = prompt(a)
	}
	return inv, workitems.Exit{}, true
}

// prompt is the item's goal plus what this attempt's condition adds.
func prompt(a *worker.Attempt) string {
	var b strings.Builder
	b.WriteString(goalOf(a))
	s := a.Condition.Strategy
	if s.Scope != "" {
		fmt.Fprintf(&b, "\n\nScope: %s", s.Scope)
	}
	if s.PromptVariant != "" {
		fmt.Fprintf(&b, "\n\nApproach: %s", s.PromptVariant)
	}
	if a.Condition.Input != "" {
		fmt.Fprintf(&b, "\n\n%s", a.Condition.Input)
	}
	return b.String()
}

// goalOf returns the item's goal, else the template's.
func goalOf(a *worker.Attempt) string {
	if a.Item != nil && a.Item.Goal != "" {
		return a.Item.Goal
	}
	return a.Template.Goal
}

// budgetExit turns a meter error into budget_exhausted.
func budgetExit(err error, last string) workitems.Exit {
	var be *worker.BudgetError
	if errors.As(err, &be) {
		return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: be.Kind, Message: be.Error(), LastMessage: last}
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvariantViolation, Message: err.Error(), LastMessage: last}
}

func (r *run) checkpointFailure(err error, op string) workitems.Exit {
	if errors.Is(err, workitems.ErrLeaseLost) {
		return workitems.Exit{Reason: workitems.ExitAborted, Class: workitems.ClassConflict,
			Message: "execloop: checkpoint " + op + ": " + err.Error()}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The checkpointer retries a failed write until the attempt stops: this is a stop.
		return workitems.Exit{Reason: workitems.ExitAborted, Message: "execloop: checkpoint " + op + ": " + err.Error()}
	}
	return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient,
		Message: "execloop: checkpoint " + op + ": " + err.Error()}
}

// save writes the state and one history entry; only a lost lease stops the run.
func (r *run) save(ctx context.Context, s step) error {
	if r.a.Checkpoints == nil {
		return nil
	}
	st := r.st
	st.LastMessage = r.redact(st.LastMessage)
	state, _ := json.Marshal(st)
	h, _ := json.Marshal(historyEntry{Offset: r.st.Offset, Kind: s.Kind, Message: r.redact(s.Message), Spend: s.Spend})
	err := r.a.Checkpoints.Save(ctx, state, h)
	if err != nil && !errors.Is(err, workitems.ErrLeaseLost) {
		r.log.Warn("execloop: checkpoint not saved", "agent", r.drv.name, "err", err)
		return nil
	}
	return err
}

// line is one line of the agent's stdout or of its usage side channel.
type line struct {
	b     []byte
	usage bool
}

func (r *run) execute(ctx context.Context, inv invocation) workitems.Exit {
	a := r.a
	lc := a.Template.Loop
	bin := lc.Command
	if bin == "" {
		bin = r.l.bins[r.drv.name]
	}
	if bin == "" {
		bin = r.drv.bin
	}
	extra := r.drv.env(inv)
	for k, v := range a.Condition.Env {
		extra[k] = v
	}
	env := proc.Env(r.l.lookupEnv, lc.Env, extra)
	path, err := lookPath(bin, a.Workspace, env)
	if err != nil {
		class := workitems.ClassNotFound
		if errors.Is(err, os.ErrPermission) {
			class = workitems.ClassPermission
		}
		return failed(class, "execloop: %s agent binary %q: %v", r.drv.name, bin, err)
	}

	policy := r.policy
	// A binary of the operator's is bound with what it links to; one in the workspace is the
	// item's, bound already, and its links are the item's to point anywhere: none followed.
	if rel, err := filepath.Rel(a.Workspace, path); err != nil || !filepath.IsLocal(rel) {
		policy.ReadOnly = append(append([]string(nil), policy.ReadOnly...), proc.BinaryDirs(path)...)
	}
	spec := proc.Spec{Argv: append([]string{path}, r.drv.args(inv)...), Dir: a.Workspace, Env: env,
		PipeStdout: true, TailMax: 8 << 10, Policy: policy, Key: a.ProcKey()}
	if r.drv.stdin {
		spec.Stdin = strings.NewReader(inv.Prompt)
	}
	var usageR *os.File
	if r.drv.name == "command" {
		var usageW *os.File
		usageR, usageW, err = os.Pipe()
		if err != nil {
			return failed(workitems.ClassUnknown, "execloop: command: usage pipe: %v", err)
		}
		spec.ExtraFiles = []*os.File{usageW}
		defer usageR.Close()
		defer usageW.Close()
	}
	r.p = r.drv.parser(r.prices(inv))
	p, err := a.Runner.Start(ctx, spec)
	if err != nil {
		class := workitems.ClassUnknown
		switch {
		case errors.Is(err, proc.ErrSandboxUnavailable):
			class = workitems.ClassPermission
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound):
			class = workitems.ClassNotFound
		case errors.Is(err, os.ErrPermission):
			class = workitems.ClassPermission
		}
		return failed(class, "execloop: start %s agent %q: %v", r.drv.name, path, err)
	}
	if len(spec.ExtraFiles) > 0 {
		spec.ExtraFiles[0].Close() // the child has its copy; EOF comes when it closes it
	}
	defer p.Stdout.Close()
	r.pgid = p.Pgid()
	r.st.Runs++
	r.emit(ctx, workitems.EventStep, workitems.KindStarted, "started "+r.drv.name+" (pid "+strconv.Itoa(r.pgid)+")",
		map[string]string{"pid": strconv.Itoa(r.pgid), "binary": path, "resume": inv.Resume})

	return r.supervise(ctx, p, p.Stdout, usageR)
}

// supervise reads the agent's output as it arrives until the agent ends, the context is
// cancelled, the wall time runs out or a step ends the run; it always leaves no process of
// the agent running and the leader reaped.
func (r *run) supervise(ctx context.Context, p *proc.Process, stdout io.Reader, usage io.Reader) workitems.Exit {
	a := r.a
	lines := make(chan line)
	done := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { defer readers.Done(); r.read(stdout, false, lines, done) }()
	if usage != nil {
		readers.Add(1)
		go func() { defer readers.Done(); r.read(usage, true, lines, done) }()
	}
	go func() { readers.Wait(); close(lines) }()

	// Wait reaps the leader once it exited and whatever it left behind is killed (that would
	// hold its output open); output already written stays readable.
	exited := make(chan struct{})
	var werr error
	go func() { defer close(exited); werr = p.Wait() }()

	var deadline <-chan time.Time
	if up, ok := a.Meter.WallTimeUp(); ok { // on the meter's clock, the handler's one clock
		deadline = up
	}

	stop := func(exit workitems.Exit) workitems.Exit {
		p.Kill()
		close(done)
		for range lines { // let the readers end
		}
		<-exited
		exit.LastMessage = r.st.LastMessage
		r.emit(context.WithoutCancel(ctx), workitems.EventStep, workitems.KindKilled, "killed "+r.drv.name+": "+string(exit.Reason),
			map[string]string{"pid": strconv.Itoa(r.pgid), "reason": string(exit.Reason)})
		return exit
	}

	leaderDone, eof := false, false
	leaderExit := (<-chan struct{})(exited)
	started, ticker := r.l.clock.Now(), r.progressTicker()
	defer ticker.Stop()
	for !leaderDone || !eof {
		select {
		case <-ticker.C:
			r.progress(ctx, p, started)
		case <-ctx.Done():
			return stop(workitems.Exit{Reason: workitems.ExitAborted, Message: "cancelled: " + context.Cause(ctx).Error()})
		case <-deadline:
			// The deadline keeps the verify reserve back, so the meter may not call it spent yet.
			b := a.Meter.Budget()
			return stop(workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetWallTime,
				Message: fmt.Sprintf("wall time %s (less %s kept for verification) used up", b.WallTime, b.VerifyReserve)})
		case <-leaderExit:
			leaderDone, leaderExit = true, nil
		case ln, ok := <-lines:
			if !ok {
				eof, lines = true, nil
				continue
			}
			if exit, end := r.handle(ctx, ln); end {
				return stop(exit)
			}
		}
	}
	close(done)
	if ctx.Err() != nil {
		return workitems.Exit{Reason: workitems.ExitAborted, Message: "cancelled", LastMessage: r.st.LastMessage}
	}
	exit := r.p.Exit(exitCode(werr), p.Tail())
	if ev, ok := worker.LimitExceeded(r.drv.name, proc.Result{Limit: p.Limit()}, r.policy); ok {
		a.Events.Emit(ctx, ev)
		exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission, Message: ev.Message,
			LastMessage: exit.LastMessage}
	}
	if err := a.Meter.Check(); err != nil && exit.Reason == workitems.ExitCompleted {
		return budgetExit(err, exit.LastMessage)
	}
	r.emit(ctx, workitems.EventStep, workitems.KindExited, r.drv.name+" exited: "+string(exit.Reason),
		map[string]string{"exit_code": strconv.Itoa(exitCode(werr))})
	return exit
}

// handle parses one line, reports it, charges it and checkpoints; end says the run must stop.
func (r *run) handle(ctx context.Context, ln line) (workitems.Exit, bool) {
	var s step
	var ok bool
	if ln.usage {
		s, ok = r.p.(*commandParser).usage(ln.b), true
	} else {
		s, ok = r.p.Line(ln.b)
	}
	r.st.Offset++
	if !ok {
		return workitems.Exit{}, false
	}
	if s.Session != "" {
		r.st.Session = s.Session
	}
	if m := r.p.Last(); m != "" {
		r.st.LastMessage = m
	}
	typ := workitems.EventStep
	if s.Warning {
		typ = workitems.EventWarning
	}
	data := map[string]string{"offset": strconv.FormatInt(r.st.Offset, 10)}
	for k, v := range s.Data {
		data[k] = v
	}
	r.emit(ctx, typ, s.Kind, s.Message, data)
	r.st.Spend = r.st.Spend.Add(s.Spend)
	berr := r.a.Meter.Add(s.Spend)
	if err := r.save(ctx, s); err != nil {
		return r.checkpointFailure(err, "save"), true
	}
	if berr != nil {
		return budgetExit(berr, ""), true
	}
	return workitems.Exit{}, false
}

// prices returns the price table for the agent's cost, from the template's provider.
func (r *run) prices(inv invocation) config.Prices {
	if inv.Provider != nil {
		return inv.Provider.Prices
	}
	return config.Prices{}
}

// read sends each line of rd until EOF or done. A line longer than the limit is cut.
func (r *run) read(rd io.Reader, usage bool, out chan<- line, done <-chan struct{}) {
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		b, err := readLine(br, r.l.maxLine)
		if len(b) > 0 {
			select {
			case out <- line{b: b, usage: usage}:
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads up to '\n', keeping at most max bytes of it.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out) < max {
			out = append(out, chunk[:min(len(chunk), max-len(out))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return []byte(strings.TrimRight(string(out), "\r\n")), err
	}
}
