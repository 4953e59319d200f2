// Package proc runs a command as its own process group with a scrubbed environment, a
// timeout, and a bounded tail of its output; cancellation or timeout kills the whole group, so
// nothing it started outlives it.
package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is one command to run.
type Spec struct {
	Command string   // run with sh -c
	Dir     string   // working directory
	Env     []string // the whole environment (KEY=VALUE); nothing is inherited
	Timeout time.Duration
	TailMax int // bytes of output kept (default 8 KiB)
}

// Result is how a command ended.
type Result struct {
	ExitCode int // -1 when killed or not started
	TimedOut bool
	Canceled bool
	Duration time.Duration
	Tail     string // last TailMax bytes of stdout+stderr
	Err      error  // start failure
}

// Run runs s and waits for it and its process group.
func Run(ctx context.Context, s Spec) Result {
	if s.TailMax <= 0 {
		s.TailMax = 8 << 10
	}
	runCtx := ctx
	var cancel context.CancelFunc
	if s.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	tail := &Tail{Max: s.TailMax}
	cmd := exec.CommandContext(runCtx, "/bin/sh", "-c", s.Command)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return KillGroup(cmd.Process) }
	cmd.WaitDelay = 2 * time.Second // pipes held open by orphans must not hang us
	start := time.Now()
	err := cmd.Run()
	// Whatever happened, no member of the group may outlive the command.
	if cmd.Process != nil {
		_ = KillGroup(cmd.Process)
	}
	r := Result{Duration: time.Since(start), Tail: tail.String(), ExitCode: -1}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.Canceled = true
	case runCtx.Err() != nil:
		r.TimedOut = true
	case err == nil:
		r.ExitCode = 0
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	default:
		r.Err = err
	}
	return r
}

// KillGroup sends SIGKILL to the process group led by p.
func KillGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Tail is an io.Writer keeping the last Max bytes written.
type Tail struct {
	Max  int
	mu   sync.Mutex
	buf  []byte
	Cut  bool // true once anything was dropped
	seen int64
}

// Write keeps the tail of p.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.Max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.Max:]...)
		t.Cut = true
	}
	return len(p), nil
}

// String returns the tail, marked when output was dropped.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Cut {
		return "…" + string(bytes.ToValidUTF8(t.buf, nil))
	}
	return string(t.buf)
}

// BaseEnv returns the scrubbed environment a child process gets: what a toolchain needs to
// work (PATH, HOME, locale, temp dir, Go's caches), never credentials.
func BaseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "GOPATH", "GOCACHE",
		"GOMODCACHE", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN", "GONOSUMDB", "GOPRIVATE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
