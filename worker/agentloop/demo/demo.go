// Package demo owns the agent loop's recorded demo: a small Go "payment" module whose
// TestRefundExpiredOrder fails, and a replay recording (worker/model's JSON-lines format) of
// a model that runs the done check, reads the code, patches it, meets a new edge case,
// patches again and finishes with the done check green. The recording is a recorded model,
// not a live one: it only fits the module exactly as WriteModule writes it.
package demo

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

//go:embed testdata/payment/*.go testdata/payment.jsonl
var files embed.FS

// Names used by the demo's configuration.
const (
	ProviderName = "recorded"
	TemplateName = "payment-refund-fix"
	Goal         = "The payment module's test TestRefundExpiredOrder fails. Find out why, fix the code " +
		"(not the test), and make the done check pass."
	// goMod is written beside the sources: a go.mod inside the repository's tree would cut the
	// sample out of the outerloop module's embed reach.
	goMod = "module example.com/payment\n\ngo 1.22\n"
)

// WriteModule writes the sample module (go.mod, payment.go, payment_test.go) into dir.
func WriteModule(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: module dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return fmt.Errorf("demo: write go.mod: %w", err)
	}
	srcs, err := fs.Glob(files, "testdata/payment/*.go")
	if err != nil {
		return fmt.Errorf("demo: list sources: %w", err)
	}
	for _, s := range srcs {
		b, err := files.ReadFile(s)
		if err != nil {
			return fmt.Errorf("demo: read %s: %w", s, err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(s)), b, 0o644); err != nil {
			return fmt.Errorf("demo: write %s: %w", filepath.Base(s), err)
		}
	}
	return nil
}

// Recording returns the replay recording.
func Recording() []byte {
	b, err := files.ReadFile("testdata/payment.jsonl")
	if err != nil {
		panic("demo: the embedded recording is missing: " + err.Error()) // a build defect
	}
	return b
}

// WriteRecording writes the recording to path, for a replay provider's file setting.
func WriteRecording(path string) error {
	if err := os.WriteFile(path, Recording(), 0o644); err != nil {
		return fmt.Errorf("demo: write recording: %w", err)
	}
	return nil
}

// ProviderConfig is the replay provider playing the recording at path.
func ProviderConfig(path string) config.ProviderConfig {
	return config.ProviderConfig{Kind: "replay", File: path}
}

// Template is the demo's agent template: loop agent on the recorded provider, done check
// `go test -json ./...`.
func Template() config.Template {
	return config.Template{
		Name: TemplateName,
		Goal: Goal,
		Loop: config.Loop{Kind: workitems.LoopAgent, Provider: ProviderName, NoProgressLimit: 3, ContextLimitTokens: 100000},
		DoneCheck: config.DoneCheck{Commands: []string{"go test -json ./..."}, Format: "gojson",
			Timeout: workitems.Duration(2 * time.Minute)},
		Budget: workitems.Budget{WallTime: workitems.Duration(10 * time.Minute), ModelCalls: 20, ToolCalls: 40, CostUSD: 1},
	}
}

// GoTestCheck is a minimal worker.DoneChecker for the sample module: `go test ./...` in Dir,
// passed when it exits 0, summarised by the tail of its output. The verifier's real done
// check reads `go test -json` evidence instead; this one lets the loop check its own work.
type GoTestCheck struct {
	Dir string
}

var _ worker.DoneChecker = GoTestCheck{}

// Check runs the tests.
func (c GoTestCheck) Check(ctx context.Context) (worker.DoneCheckResult, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "./...")
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return worker.DoneCheckResult{}, fmt.Errorf("demo: go test: %w", err)
	}
	s := strings.TrimSpace(out.String())
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return worker.DoneCheckResult{Passed: err == nil, Summary: s}, nil
}
