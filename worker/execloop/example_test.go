package execloop_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"outerloop/worker"
	"outerloop/worker/execloop"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A `command` agent: any program. It reads the prompt on stdin, may report usage as JSON
// lines on fd 3, and its exit status (0, 75 for transient, other) ends the attempt.
func Example() {
	dir, _ := os.MkdirTemp("", "execloop-example")
	defer os.RemoveAll(dir)
	a := &worker.Attempt{
		Item: &workitems.Item{ID: "it-1", Goal: "Say hello."},
		Template: &config.Template{Name: "hello", Loop: config.Loop{Kind: "exec", Agent: "command",
			Command: "sh", Args: []string{"-c", `echo '{"model_calls":1,"cost_usd":0.01}' >&3; echo "hello from $(cat)"`}}},
		Workspace: dir,
		Meter:     worker.NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute)}, workitems.Spend{}, nil),
	}
	exit := execloop.New().Run(context.Background(), a)
	fmt.Println(exit.Reason, "|", exit.LastMessage, "|", a.Meter.Spent().CostUSD)
	// Output: completed | hello from Say hello. | 0.01
}
