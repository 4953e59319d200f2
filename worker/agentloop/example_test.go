package agentloop_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// checkpoints keeps an attempt's checkpoint in memory.
type checkpoints struct {
	mu      sync.Mutex
	state   []byte
	history [][]byte
}

func (c *checkpoints) Load(context.Context) ([]byte, [][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.history, nil
}

func (c *checkpoints) Save(_ context.Context, st []byte, h ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state, c.history = st, append(c.history, h...)
	return nil
}

// Run the agent loop with a scripted model that writes a file and answers.
func Example() {
	dir, _ := os.MkdirTemp("", "agentloop-example")
	defer os.RemoveAll(dir)
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "write_file", `{"path":"NOTES.md","content":"hello\n"}`))),
		model.Reply(model.TextResponse("Wrote NOTES.md.")))
	tmpl := &config.Template{Name: "notes", Goal: "write a note", Loop: config.Loop{Kind: "agent", Provider: "scripted"}}
	a := &worker.Attempt{
		Item: &workitems.Item{ID: "notes@1", Goal: tmpl.Goal}, N: 1, Template: tmpl, Workspace: dir,
		Meter:       worker.NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute), ModelCalls: 10}, workitems.Spend{}, nil),
		Checkpoints: &checkpoints{},
	}
	ex := agentloop.New(agentloop.WithProvider(p)).Run(context.Background(), a)
	b, _ := os.ReadFile(dir + "/NOTES.md")
	fmt.Println(ex.Reason, "-", ex.LastMessage)
	fmt.Printf("NOTES.md: %q, model calls: %d\n", b, a.Meter.Spent().ModelCalls)
	// Output:
	// completed - Wrote NOTES.md.
	// NOTES.md: "hello\n", model calls: 2
}
