package agentloop

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
)

func newTestToolbox(t *testing.T) (*toolbox, string) {
	t.Helper()
	dir := t.TempDir()
	lookup := func(k string) (string, bool) {
		if k == "OPENAI_API_KEY" {
			return "sk-should-not-leak", true
		}
		return os.LookupEnv(k)
	}
	tb, err := newToolbox(dir, false, append(defaultShellEnv(), "OPENAI_API_KEY_NOT_PASSED"), map[string]string{"EXTRA": "yes"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.root.Close() })
	return tb, dir
}

func TestBadToolArguments(t *testing.T) {
	t.Parallel()
	tb, _ := newTestToolbox(t)
	for _, tc := range []struct {
		name, args, want string
		run              func(context.Context, string) toolResult
	}{
		{"invalid JSON names the tool", `{"path":`, "read_file: arguments are not a JSON object", tb.readFile},
		{"a missing field is named", `{}`, `read_file: missing required field "path"`, tb.readFile},
		{"write_file names its missing content", `{"path":"a"}`, `write_file: missing required field "content"`, tb.writeFile},
		{"a wrongly typed field is named", `{"path":3}`, `read_file: bad arguments`, tb.readFile},
		{"an unknown field is named", `{"command":"true","cwd":"/"}`, `unknown field "cwd"`, tb.shell},
		{"apply_patch without a patch", `{"diff":"x"}`, `apply_patch: missing required field "patch"`, tb.applyPatch},
		{"search with a bad pattern", `{"pattern":"("}`, `search: pattern`, tb.search},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := tc.run(t.Context(), tc.args)
			if !res.failed || !strings.Contains(res.out, tc.want) {
				t.Fatalf("got %+v, want an error containing %q", res, tc.want)
			}
		})
	}
}

func TestWorkspaceEscapesTouchNothing(t *testing.T) {
	t.Parallel()
	tb, dir := newTestToolbox(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "secretlink"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "ok"), []byte("fine\n"), 0o644)
	patch := func(body string) string {
		b, _ := jsonString("*** Begin Patch\n" + body + "\n*** End Patch")
		return `{"patch":` + b + `}`
	}
	for _, tc := range []struct {
		name, args string
		run        func(context.Context, string) toolResult
	}{
		{"read_file refuses ..", `{"path":"sub/../../x"}`, tb.readFile},
		{"read_file refuses an absolute path", `{"path":"/etc/passwd"}`, tb.readFile},
		{"read_file refuses a symlinked file pointing out", `{"path":"secretlink"}`, tb.readFile},
		{"list_dir refuses a symlinked directory pointing out", `{"path":"out"}`, tb.listDir},
		{"search refuses a path outside", `{"pattern":"s3","path":".."}`, tb.search},
		{"write_file refuses to write through a symlink", `{"path":"out/new","content":"x"}`, tb.writeFile},
		{"write_file refuses ..", `{"path":"../new","content":"x"}`, tb.writeFile},
		{"apply_patch refuses to add outside", patch("*** Add File: ../new\n+x"), tb.applyPatch},
		{"apply_patch refuses to update through a symlink", patch("*** Update File: out/secret\n-s3cret\n+pwned"), tb.applyPatch},
		{"apply_patch refuses to move outside", patch("*** Update File: sub/../ok\n*** Move to: /tmp/x"), tb.applyPatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.run(t.Context(), tc.args)
			if !res.failed || !strings.Contains(res.out, "escapes the workspace") || strings.Contains(res.out, "s3cret") {
				t.Fatalf("got %+v", res)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatal("the outside file changed")
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Fatalf("files appeared outside: %v", es)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "new")); err == nil {
		t.Fatal("../new was created")
	}
}

func TestFileTools(t *testing.T) {
	t.Parallel()
	tb, dir := newTestToolbox(t)
	ctx := t.Context()
	if res := tb.writeFile(ctx, `{"path":"pkg/a.go","content":"package a\n\nfunc A() int {\n\treturn 1\n}\n"}`); res.failed {
		t.Fatal(res.out)
	}
	if res := tb.readFile(ctx, `{"path":"pkg/a.go","offset":3,"limit":1}`); res.out != "func A() int {\n[2 more lines; read on with offset 4]" {
		t.Fatalf("read_file window %q", res.out)
	}
	if res := tb.listDir(ctx, `{"path":"."}`); res.out != "pkg/\n" {
		t.Fatalf("list_dir %q", res.out)
	}
	if res := tb.search(ctx, `{"pattern":"return \\d","glob":"*.go"}`); res.out != "pkg/a.go:4: \treturn 1" {
		t.Fatalf("search %q", res.out)
	}
	b, _ := jsonString("*** Begin Patch\n*** Update File: pkg/a.go\n@@ func A() int {\n-\treturn 1\n+\treturn 2\n*** Add File: pkg/b.go\n+package a\n*** End Patch\n")
	if res := tb.applyPatch(ctx, `{"patch":`+b+`}`); res.failed || !strings.Contains(res.out, "M pkg/a.go") {
		t.Fatalf("apply_patch %+v", res)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "pkg/a.go"))
	if string(got) != "package a\n\nfunc A() int {\n\treturn 2\n}\n" {
		t.Fatalf("patched file %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "pkg/b.go")); err != nil {
		t.Fatal("added file missing")
	}
	t.Run("a hunk that does not match changes nothing", func(t *testing.T) {
		b, _ := jsonString("*** Begin Patch\n*** Add File: pkg/c.go\n+package a\n*** Update File: pkg/a.go\n-\treturn 7\n+\treturn 8\n*** End Patch")
		res := tb.applyPatch(ctx, `{"patch":`+b+`}`)
		if !res.failed || !strings.Contains(res.out, "hunk 1") {
			t.Fatalf("got %+v", res)
		}
		if _, err := os.Stat(filepath.Join(dir, "pkg/c.go")); err == nil {
			t.Fatal("a file of the failed patch was written")
		}
	})
	t.Run("a patch without its markers is refused", func(t *testing.T) {
		if res := tb.applyPatch(ctx, `{"patch":"--- a/x\n+++ b/x\n"}`); !res.failed || !strings.Contains(res.out, "Begin Patch") {
			t.Fatalf("got %+v", res)
		}
	})
}

func TestShell(t *testing.T) {
	t.Parallel()
	t.Run("the environment is scrubbed but keeps PATH and the condition's variables", func(t *testing.T) {
		t.Parallel()
		tb, _ := newTestToolbox(t)
		res := tb.shell(t.Context(), `{"command":"env"}`)
		if strings.Contains(res.out, "sk-should-not-leak") || !strings.Contains(res.out, "PATH=") || !strings.Contains(res.out, "EXTRA=yes") {
			t.Fatalf("env %q", res.out)
		}
	})
	t.Run("a non-zero exit is a failed observation with its code", func(t *testing.T) {
		t.Parallel()
		tb, _ := newTestToolbox(t)
		res := tb.shell(t.Context(), `{"command":"echo boom; exit 3"}`)
		if !res.failed || !strings.Contains(res.out, "boom") || !strings.Contains(res.out, "[exit code 3]") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("output is bounded, head and tail kept", func(t *testing.T) {
		t.Parallel()
		tb, _ := newTestToolbox(t)
		res := tb.shell(t.Context(), `{"command":"echo first; yes x | head -c 200000; echo; echo last"}`)
		if len(res.out) > maxShellOutput+200 || !strings.HasPrefix(res.out, "first") || !strings.Contains(res.out, "last") || !strings.Contains(res.out, "bytes cut") {
			t.Fatalf("%d bytes: %.80q … %q", len(res.out), res.out, res.out[max(0, len(res.out)-80):])
		}
	})
	t.Run("a timeout kills the command", func(t *testing.T) {
		t.Parallel()
		tb, _ := newTestToolbox(t)
		res := tb.shell(t.Context(), `{"command":"sleep 30","timeout_seconds":1}`)
		if !res.failed || !strings.Contains(res.out, "timed out") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("cancel kills the whole process group", func(t *testing.T) {
		t.Parallel()
		tb, dir := newTestToolbox(t)
		fifo := filepath.Join(dir, "ready")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		pid := make(chan int, 1)
		go func() {
			f, err := os.Open(fifo) // blocks until the shell opens it for writing
			if err != nil {
				pid <- 0
				return
			}
			defer f.Close()
			line, _ := bufio.NewReader(f).ReadString('\n')
			n, _ := strconv.Atoi(strings.TrimSpace(line))
			pid <- n
			cancel()
		}()
		res := tb.shell(ctx, `{"command":"sleep 60 & echo $! > ready; wait"}`)
		child := <-pid
		if child == 0 || !res.failed {
			t.Fatalf("child %d, result %+v", child, res)
		}
		// The background child must be dead (gone, or a zombie nobody reaps yet).
		deadline := testwait.Deadline(t)
		for !processDead(child) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d of the shell survived the cancel", child)
			}
			runtimeGosched()
		}
	})
}

func processDead(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func TestApplyHunks(t *testing.T) {
	t.Parallel()
	const src = "a\nfunc F() {\n\tx := 1\n}\nz\n"
	for _, tc := range []struct {
		name  string
		hunks []patchHunk
		want  string
	}{
		{"a hunk replaces its lines", []patchHunk{{old: []string{"\tx := 1"}, new: []string{"\tx := 2"}}}, "a\nfunc F() {\n\tx := 2\n}\nz\n"},
		{"an anchor repeated as context still matches", []patchHunk{{anchor: "func F() {", old: []string{"func F() {", "\tx := 1"}, new: []string{"func F() {", "\tx := 3"}}}, "a\nfunc F() {\n\tx := 3\n}\nz\n"},
		{"trailing white space is forgiven", []patchHunk{{old: []string{"\tx := 1  "}, new: []string{"\tx := 4"}}}, "a\nfunc F() {\n\tx := 4\n}\nz\n"},
		{"an end-of-file hunk appends", []patchHunk{{new: []string{"tail"}, eof: true}}, src + "tail\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := applyHunks("f.go", src, tc.hunks)
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
