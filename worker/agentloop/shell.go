package agentloop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"outerloop/proc"
	"outerloop/workitems"
)

// maxShellOutput bounds what a shell call keeps of its output (head and tail).
const maxShellOutput = 32 << 10

// defaultShellEnv names the environment variables the shell passes through: the runner's one
// allowlist; everything else (API keys, tokens) is scrubbed.
func defaultShellEnv() []string { return proc.AllowedEnv() }

// scrubbedEnv is the allowlist and names read through lookup, plus extra (the condition's env).
func scrubbedEnv(names []string, extra map[string]string, lookup func(string) (string, bool)) []string {
	return proc.Env(lookup, names, extra)
}

// limitedWriter keeps the first n bytes and counts the rest.
type limitedWriter struct {
	w       io.Writer
	n       int
	dropped int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		l.dropped += len(p)
		return len(p), nil
	}
	k := min(len(p), l.n)
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	l.n -= k
	l.dropped += len(p) - k
	return len(p), nil
}

// tailBuffer keeps the first and the last half of maxShellOutput bytes of a stream. Stdout and
// stderr write to it from two goroutines.
type tailBuffer struct {
	mu    sync.Mutex
	head  bytes.Buffer
	tail  []byte
	total int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += n
	half := maxShellOutput / 2
	if room := half - t.head.Len(); room > 0 {
		k := min(room, len(p))
		t.head.Write(p[:k])
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > half {
		t.tail = t.tail[len(t.tail)-half:]
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	cut := t.total - t.head.Len() - len(t.tail)
	if cut <= 0 {
		return t.head.String() + string(t.tail)
	}
	return t.head.String() + fmt.Sprintf("\n… [%d bytes cut] …\n", cut) + string(t.tail)
}

func (tb *toolbox) shell(ctx context.Context, raw string) toolResult {
	var args struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
	if err := decodeArgs("shell", raw, &args, "command"); err != nil {
		return errResult("%v", err)
	}
	if args.Command == "" {
		return errResult("shell: field \"command\" is empty")
	}
	timeout := DefaultShellTimeout
	if args.TimeoutSeconds > 0 {
		timeout = min(time.Duration(args.TimeoutSeconds)*time.Second, 10*time.Minute)
	}
	var out tailBuffer
	spec := proc.Spec{Command: args.Command, Dir: tb.dir, Env: tb.env, Timeout: timeout,
		Stdout: &out, Stderr: &out, TailMax: 1, Policy: tb.policy, Key: tb.key}
	if tb.progress != nil { // the output so far is in out (the runner's own tail is 1 byte)
		spec.Progress = func(elapsed time.Duration, _ string) { tb.progress(elapsed, out.String()) }
		spec.ProgressEvery = tb.progressEvery
	}
	r := tb.runner.Run(ctx, spec)
	switch {
	case r.Err != nil:
		return errResult("shell: %v", r.Err)
	case r.Canceled:
		return toolResult{out: out.String(), failed: true}
	case r.TimedOut:
		return toolResult{out: out.String() + fmt.Sprintf("\n[killed: timed out after %s]", timeout), failed: true}
	case r.Limit != "":
		if tb.limited != nil {
			tb.limited(args.Command, r, tb.policy)
		}
		return toolResult{out: out.String() + "\n[stopped: " +
			workitems.LimitExceededMessage("the command", r.Limit, tb.policy.Limits.Written.Get(r.Limit)) + "]", failed: true}
	case r.ExitCode == 0:
		return toolResult{out: out.String() + "\n[exit code 0]"}
	}
	return toolResult{out: out.String() + fmt.Sprintf("\n[exit code %d]", r.ExitCode), failed: true}
}

// fingerprint summarises the workspace's files (path, size, mode, modification time), for the
// built-in stop hook's "did anything change since the last done check". It skips .git.
func fingerprint(dir string) string {
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%d\x00%o\x00%d\n", rel, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}
