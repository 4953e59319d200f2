// Package proc owns the child processes of items: the one runner that script steps, the
// agent's shell tool, done checks, stop hooks and exec agents all start through. It owns
//
//   - the environment: one allowlist (AllowedEnv) plus what the caller passes on purpose;
//   - the sandbox: bubblewrap with its own pid, mount, ipc and uts namespaces, the workspace
//     read-write, system and toolchain directories read-only, a private /tmp, an empty $HOME,
//     no network unless the policy says host (sandbox.go);
//   - the lifetime: every command leads its own process group under a guard process (the worker
//     binary re-exec'd, guard.go) that kills the group and every descendant when the command
//     ends, when it is cancelled or timed out, and when its pipe to the worker closes because
//     the worker died (or the parent-death signal says so); it survives the SIGHUP and SIGPIPE
//     the worker's death sends it, and the command's leader dies with it should it be killed
//     outright (guard_death.go); the group and boot id are recorded before the command starts
//     (records.go) so a resumed attempt on this host kills what a dead execution left;
//   - the resource limits (limits.go, cgroup.go) and the egress bridge to the worker's
//     allowlisting proxy (egress.go);
//   - bounded output (Tail);
//   - redaction of what is recorded of a process: secrets in its output and command line
//     (Redact), credentials in repository URLs (RedactURL, RedactURLError) (redact.go);
//   - git as outerloop itself runs it (Git: its flags, environment and redacted errors; git.go).
//
// A Runner's zero value runs commands unconfined and unguarded, as the package-level Run does
// (forge's push runs git so, with its timeout and process group); the worker builds a configured
// Runner.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"outerloop/workitems"
)

// realTime is the clock of the processes proc starts and kills: they run in real time whatever
// clock the item reads, so their durations and kill deadlines read the system clock (a
// stateless value: nothing to inject).
var realTime = workitems.SystemClock{}

// Spec is one command to run.
type Spec struct {
	Command string   // run with sh -c (when Argv is empty)
	Argv    []string // the program and its arguments, run as is
	Dir     string   // working directory
	Env     []string // the whole environment (KEY=VALUE); nothing is inherited
	Timeout time.Duration
	TailMax int // bytes of output kept (default 8 KiB)

	Stdin      io.Reader
	Stdout     io.Writer  // also gets stdout (beside the tail), e.g. a report file
	Stderr     io.Writer  // also gets stderr
	ExtraFiles []*os.File // passed as fds 3, 4, …
	PipeStdout bool       // Start: stdout goes to Process.Stdout instead (Run ignores it)

	// Policy is what the command may reach when sandboxed.
	Policy Policy
	// Key names the execution owning the command (item and attempt) in the records, so that a
	// resumed execution can kill what a dead one left (Runner.Reap).
	Key string

	// Progress, when set, is called every ProgressEvery (default DefaultProgressEvery) while
	// Run waits, with the elapsed time and the output's tail so far (progress.go).
	Progress      Progress
	ProgressEvery time.Duration

	egress *egressRun // the command's proxy (network registries), set by Start
}

// Result is how a command ended.
type Result struct {
	ExitCode int // -1 when killed or not started
	Signal   syscall.Signal
	TimedOut bool
	Canceled bool
	Duration time.Duration
	Tail     string // last TailMax bytes of stdout+stderr
	Err      error  // start failure (errors.Is ErrSandboxUnavailable when refused)
	// Limit names the resource limit (Policy.Limits) that stopped the command, "" when none.
	Limit workitems.Limit
}

// Run runs s unconfined and unguarded (the zero Runner) and waits for it and its process group.
func Run(ctx context.Context, s Spec) Result { return (*Runner)(nil).Run(ctx, s) }

// Run runs s and waits for it and everything it started. A nil Runner runs unconfined.
func (r *Runner) Run(ctx context.Context, s Spec) Result {
	if s.TailMax <= 0 {
		s.TailMax = 8 << 10
	}
	s.PipeStdout = false
	runCtx := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	start := realTime.Now()
	p, err := r.Start(runCtx, s)
	if err != nil {
		return Result{ExitCode: -1, Err: err, Duration: realTime.Now().Sub(start)}
	}
	stop := context.AfterFunc(runCtx, p.Kill)
	stopProgress := watchProgress(s, p, start)
	werr := p.Wait()
	stopProgress()
	stop()
	res := Result{Duration: realTime.Now().Sub(start), Tail: p.tail.String(), ExitCode: -1}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.Canceled = true
	case runCtx.Err() != nil:
		res.TimedOut = true
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal()
		} else if r.guarded() && ee.ExitCode() > 128 && ee.ExitCode() <= 128+64 && p.sandboxed {
			// bwrap reports a signalled command as 128+signal.
			res.Signal = syscall.Signal(ee.ExitCode() - 128)
		}
	default:
		res.Err = werr
	}
	if res.Limit = p.Limit(); res.Limit == "" && !res.TimedOut && !res.Canceled {
		res.Limit = rlimitHit(s.Policy.Limits, res)
	}
	return res
}

// Process is a started command.
type Process struct {
	cmd       *exec.Cmd
	ctl       *os.File // the worker's end of the guard's pipe; closing it kills everything
	pgid      int
	record    string
	tail      *Tail
	killWait  time.Duration
	sandboxed bool
	egress    *egressRun
	exited    chan struct{}
	mu        sync.Mutex // held while killing or reaping, so a kill never meets a reused pid
	reaped    bool
	group     *cmdGroup // the command's cgroup (limits.go), removed by Wait
	limitMu   sync.Mutex
	limit     workitems.Limit
	// Stdout is the command's stdout when Spec.PipeStdout is set; the caller reads it to EOF
	// (it comes once the command and everything it started are gone) and closes it.
	Stdout io.ReadCloser
}

// Pgid returns the process group every process of the command is in (the guard's, when
// guarded).
func (p *Process) Pgid() int { return p.pgid }

// Tail returns the bounded tail of what the command wrote (stderr only with PipeStdout).
func (p *Process) Tail() string { return p.tail.String() }

// Start starts s; the caller must call Wait. Cancelling ctx does not kill it: call Kill.
func (r *Runner) Start(ctx context.Context, s Spec) (*Process, error) {
	if s.TailMax <= 0 {
		s.TailMax = 8 << 10
	}
	argv := s.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", s.Command}
	}
	env := s.Env
	mode := r.modeFor(s.Policy)
	p := &Process{tail: &Tail{Max: s.TailMax}, killWait: 10 * time.Second, exited: make(chan struct{})}
	if mode == ModeBwrap {
		if err := r.available(); err != nil {
			return nil, err
		}
		if s.Policy.Network == NetworkRegistries {
			eg, err := r.startEgress(s)
			if err != nil {
				return nil, err
			}
			s.egress, p.egress = eg, eg
			// The bridge binary goes in by descriptor (egress.go), after the caller's files.
			s.ExtraFiles = append(s.ExtraFiles[:len(s.ExtraFiles):len(s.ExtraFiles)], eg.bin)
			defer func() {
				if p.cmd == nil { // not started: nothing will Wait
					eg.stop()
				}
			}()
		}
		var err error
		argv, env, err = r.bwrapArgv(s, argv, env)
		if err != nil {
			return nil, err
		}
		p.sandboxed = true
	}
	argv, group, err := r.limitsArgv(s.Policy.Limits, argv)
	if err != nil {
		return nil, err
	}
	p.group = group
	var ctlPeer *os.File
	if r.guarded() {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			group.remove(time.Second)
			return nil, fmt.Errorf("proc: guard pipe: %w", err)
		}
		p.ctl, ctlPeer = os.NewFile(uintptr(fds[0]), "guard-ctl"), os.NewFile(uintptr(fds[1]), "guard-peer")
		defer ctlPeer.Close()
		ctlFD := 3 + len(s.ExtraFiles)
		argv = append(append(append([]string(nil), r.Guard...), fmt.Sprintf("%d:%d", ctlFD, os.Getpid()), "--"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = s.Dir, env
	if p.sandboxed {
		cmd.Dir = "" // bwrap changes directory inside (--chdir); outside it may not exist
	}
	cmd.Stdin = s.Stdin
	cmd.Stdout = teeTail(p.tail, s.Stdout)
	cmd.Stderr = teeTail(p.tail, s.Stderr)
	cmd.ExtraFiles = append([]*os.File(nil), s.ExtraFiles...)
	if ctlPeer != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ctlPeer)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second // pipes held open by escaped processes must not hang us
	var stdoutW *os.File
	if s.PipeStdout {
		// Our own pipe, not cmd.StdoutPipe: Wait must not close it before the caller read it all.
		rd, wr, err := os.Pipe()
		if err != nil {
			p.closeCtl()
			group.remove(time.Second)
			return nil, fmt.Errorf("proc: stdout pipe: %w", err)
		}
		cmd.Stdout, p.Stdout, stdoutW = wr, rd, wr
	}
	err = cmd.Start()
	if stdoutW != nil {
		stdoutW.Close() // the child has its copy; EOF comes when everything holding it is gone
	}
	if err != nil {
		p.closeCtl()
		if p.Stdout != nil {
			p.Stdout.Close()
		}
		group.remove(time.Second)
		return nil, fmt.Errorf("proc: start %s: %w", argv[0], err)
	}
	p.cmd, p.pgid = cmd, cmd.Process.Pid
	// Learn that the leader exited without reaping it, so its pid (the group id) cannot be
	// reused while we kill what it left behind.
	go func() {
		defer close(p.exited)
		var si unix.Siginfo
		for unix.Waitid(unix.P_PID, p.pgid, &si, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
	}()
	if p.ctl != nil {
		// The guard holds the command until it is recorded: nothing runs unrecorded.
		p.record = r.writeRecord(s.Key, p.pgid)
		if _, err := p.ctl.Write([]byte{'g'}); err != nil {
			p.Kill()
			_ = p.Wait()
			return nil, fmt.Errorf("proc: guard did not take the command: %w", err)
		}
	}
	if group != nil {
		go p.watchLimits()
	}
	return p, nil
}

// Kill kills the command and everything it started. Safe to call more than once and
// concurrently with Wait.
func (p *Process) Kill() {
	p.closeCtl()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		KillTree(p.pgid, p.killWait)
	}
}

func (p *Process) closeCtl() {
	if p.ctl != nil {
		_ = p.ctl.Close()
	}
}

// Wait waits for the command's leader, kills whatever of its group and descendants is left,
// and reaps the leader. It returns the leader's exit error (as exec.Cmd.Wait).
func (p *Process) Wait() error {
	<-p.exited
	p.mu.Lock()
	KillTree(p.pgid, p.killWait) // the leader is a zombie: its pid cannot be reused yet
	err := p.cmd.Wait()
	p.reaped = true
	p.mu.Unlock()
	p.closeCtl()
	if p.group != nil {
		if l := p.group.hit(); l != "" {
			p.setLimit(l)
		}
		p.group.remove(5 * time.Second)
	}
	removeRecord(p.record)
	if p.egress != nil {
		p.egress.stop()
	}
	return err
}

// teeTail writes to the tail and to w (when set).
func teeTail(t *Tail, w io.Writer) io.Writer {
	if w == nil {
		return t
	}
	return io.MultiWriter(w, t)
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
