package agentloop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// memCheckpointer is an in-memory, fenced Checkpointer. After lose() every Save fails with
// workitems.ErrLeaseLost (another worker took over); crashAfter simulates a process that
// dies right after a save the predicate picks: later saves are lost the same way.
type memCheckpointer struct {
	mu         sync.Mutex
	state      []byte
	history    [][]byte
	saves      []state // every accepted save, decoded
	lost       bool
	rejected   int
	crashAfter func(st state) bool
	loseAfter  int // lose the lease after this many accepted saves (0: never)
}

func (c *memCheckpointer) Load(context.Context) ([]byte, [][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.state), slices.Clone(c.history), nil
}

func (c *memCheckpointer) Save(_ context.Context, st []byte, appendHistory ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		c.rejected++
		return fmt.Errorf("save checkpoint: %w", workitems.ErrLeaseLost)
	}
	var s state
	if err := json.Unmarshal(st, &s); err != nil {
		return err
	}
	c.state = slices.Clone(st)
	c.history = append(c.history, appendHistory...)
	c.saves = append(c.saves, s)
	if (c.crashAfter != nil && c.crashAfter(s)) || (c.loseAfter > 0 && len(c.saves) >= c.loseAfter) {
		c.lost = true
	}
	return nil
}

func (c *memCheckpointer) last() state {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves[len(c.saves)-1]
}

func (c *memCheckpointer) items(t *testing.T) []model.Item {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []model.Item
	for _, h := range c.history {
		var it model.Item
		if err := json.Unmarshal(h, &it); err != nil {
			t.Fatalf("history entry: %v", err)
		}
		out = append(out, it)
	}
	return out
}

// clone copies the persisted checkpoint (what survives a crash), leaving the lease intact.
func (c *memCheckpointer) clone() *memCheckpointer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &memCheckpointer{state: slices.Clone(c.state), history: slices.Clone(c.history)}
}

// memEvents records events; on, when set, sees each event as it is emitted.
type memEvents struct {
	mu     sync.Mutex
	events []workitems.Event
	on     func(workitems.Event)
}

func (e *memEvents) Emit(_ context.Context, ev workitems.Event) {
	if !slices.Contains(AllEventKinds(), workitems.EventKind(ev.Data["kind"])) {
		panic(fmt.Sprintf("event kind %q is not in AllEventKinds", ev.Data["kind"]))
	}
	e.mu.Lock()
	e.events = append(e.events, ev)
	on := e.on
	e.mu.Unlock()
	if on != nil {
		on(ev)
	}
}

func (e *memEvents) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		out = append(out, ev.Data["kind"])
	}
	return out
}

func (e *memEvents) of(kind string) []workitems.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []workitems.Event
	for _, ev := range e.events {
		if ev.Data["kind"] == kind {
			out = append(out, ev)
		}
	}
	return out
}

// memSteer is a queue of steer input.
type memSteer struct {
	mu      sync.Mutex
	queue   []string
	onDrain func()
}

func (s *memSteer) Push(in string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, in)
}

func (s *memSteer) Drain(context.Context) ([]string, error) {
	s.mu.Lock()
	out := s.queue
	s.queue = nil
	f := s.onDrain
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return out, nil
}

// doneFunc is a DoneChecker from a function.
type doneFunc func(ctx context.Context) (worker.DoneCheckResult, error)

func (f doneFunc) Check(ctx context.Context) (worker.DoneCheckResult, error) { return f(ctx) }

// harness wires one attempt with in-memory doubles.
type harness struct {
	t      testing.TB
	dir    string
	cp     *memCheckpointer
	ev     *memEvents
	steer  *memSteer
	clock  *fakeclock.Clock
	tmpl   *config.Template
	budget workitems.Budget
	done   worker.DoneChecker
	prices config.Prices
	resume bool
	runner *proc.Runner // made at the first attempt

	sleepMu sync.Mutex
	sleeps  []time.Duration
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return &harness{
		t: t, dir: t.TempDir(), cp: &memCheckpointer{}, ev: &memEvents{}, steer: &memSteer{}, clock: fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)),
		tmpl: &config.Template{Name: "fix", Goal: "make the tests pass",
			Loop: config.Loop{Kind: "agent", Provider: "scripted", NoProgressLimit: 3}},
		budget: workitems.Budget{WallTime: workitems.Duration(time.Hour), ModelCalls: 1000, ToolCalls: 1000},
	}
}

func (h *harness) attempt() *worker.Attempt {
	if h.runner == nil {
		h.runner = proctest.Runner(h.t, proc.ModeBwrap) // tools run sandboxed, as in production
	}
	return &worker.Attempt{
		Item: &workitems.Item{ID: "fix@1", Template: "fix", Goal: h.tmpl.Goal}, N: 1,
		Template:  h.tmpl,
		Config:    &config.Config{Providers: map[string]config.ProviderConfig{"scripted": {Kind: "replay", Prices: h.prices}}},
		Workspace: h.dir, Resumed: h.resume,
		Meter:       worker.NewMeter(h.budget, workitems.Spend{}, h.clock),
		Checkpoints: h.cp, Events: h.ev, Steer: h.steer, DoneCheck: h.done,
		Runner: h.runner,
	}
}

func (h *harness) loop(p model.Provider, opts ...Option) *Loop {
	base := []Option{WithProvider(p), WithJitter(func() float64 { return 1 }),
		WithSleep(func(_ context.Context, d time.Duration) error {
			h.sleepMu.Lock()
			defer h.sleepMu.Unlock()
			h.sleeps = append(h.sleeps, d)
			return nil
		})}
	return New(append(base, opts...)...)
}

func (h *harness) run(ctx context.Context, p model.Provider, opts ...Option) workitems.Exit {
	return h.loop(p, opts...).Run(ctx, h.attempt())
}

// terminals returns the terminal events emitted.
func (h *harness) terminals() []string {
	var out []string
	for _, k := range h.ev.kinds() {
		if k == "turn_completed" || k == "turn_aborted" || k == "turn_error" {
			out = append(out, k)
		}
	}
	return out
}

// userTexts returns the texts of the user messages of a request.
func userTexts(r model.Request) []string {
	var out []string
	for _, it := range r.Input {
		if it.Kind == model.KindMessage && it.Role == model.RoleUser {
			out = append(out, it.Text)
		}
	}
	return out
}

// outputOf returns the output recorded for callID in a request, and whether there is one.
func outputOf(r model.Request, callID string) (string, bool) {
	for _, it := range r.Input {
		if it.Kind == model.KindFunctionCallOutput && it.CallID == callID {
			return it.Output, true
		}
	}
	return "", false
}

func usage(in, out int64) model.Usage { return model.Usage{InputTokens: in, OutputTokens: out} }

func withUsage(r *model.Response, u model.Usage) *model.Response {
	r.Usage = u
	return r
}

func notEnd(text string) *model.Response {
	r := model.TextResponse(text)
	r.EndTurn = false
	return r
}

func jsonString(s string) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// runtimeGosched yields while a test waits for the kernel to finish a kill it cannot be told about.
func runtimeGosched() { time.Sleep(time.Millisecond) }

// compactionLimit is the context limit of the compaction tests: one reply of overflowRead's
// usage crosses it.
const compactionLimit = 500

// newCompactionHarness is a harness whose context limit the first reply overflows, with a.txt
// ("secret sauce") in its workspace; overflowRead is that first reply: it reads a.txt and
// reports 900 input tokens.
func newCompactionHarness(t testing.TB) (h *harness, overflowRead model.ScriptStep) {
	t.Helper()
	h = newHarness(t)
	h.tmpl.Loop.ContextLimitTokens = compactionLimit
	if err := os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("secret sauce"), 0o644); err != nil {
		t.Fatal(err)
	}
	return h, model.Reply(withUsage(model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`)), usage(900, 50)))
}
