package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(prepareChildEnv); spec != "" {
		os.Exit(prepareChild(spec))
	}
	goleak.VerifyTestMain(m)
}

// prepareChildEnv makes the test binary a second process preparing a workspace (see
// TestConcurrentPreparationsShareOneMirror): "root|repo|item|attempt".
const prepareChildEnv = "OUTERLOOP_TEST_PREPARE"

func prepareChild(spec string) int {
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil || len(args) != 4 {
		fmt.Fprintln(os.Stderr, "bad spec", spec)
		return 2
	}
	n, _ := strconv.Atoi(args[3])
	w := &Workspaces{Root: args[0], Deployment: "test"}
	ws, err := w.Prepare(context.Background(), args[2], n, args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"created": ws.MirrorCreated, "commit": ws.Base.Commit, "dir": ws.Dir})
	return 0
}
