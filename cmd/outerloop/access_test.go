package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"outerloop/api"
)

// TestServeGuardsQueuesAndAuditsEveryAction runs the real binary with personal tokens from a
// tokens file and a read login: asynqmon's pause needs an operator (the gap of issue 12.7 was
// 204 without any token), reads need a login, and `outerloop audit` lists who did what, with
// no token in the list or the server's log; the CLI's own actions are recorded too.
func TestServeGuardsQueuesAndAuditsEveryAction(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, fixTemplate)
	c := newCLI(t, cfg)
	const alice, bob = "alice-operator-token-0123456789", "bob-viewer-token-0123456789abc"
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: alice, role: operator, token_env: ALICE_TOKEN}\n"+
		"  - {name: bob, role: viewer, token_env: BOB_TOKEN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := c.command("serve", "--addr", addr, "--queues-ui", "--no-worker", "--no-scheduler")
	cmd.Env = append(os.Environ(), "OUTERLOOP_TOKENS_FILE="+tokens, "ALICE_TOKEN="+alice, "BOB_TOKEN="+bob, "OUTERLOOP_READ_LOGIN=1")
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")
	do := func(method, path, tok, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := do("POST", "/api/items", alice, `{"template":"fix"}`); got != 201 {
		t.Fatalf("operator enqueue: %d", got)
	}
	pause := "/queues/api/queues/" + c.env.Queue + ":pause"
	for _, tc := range []struct {
		name, method, path, tok string
		want                    int
	}{
		{"a read without a login", "GET", "/api/items", "", 401},
		{"the console without a login goes to the login page", "GET", "/", "", 303},
		{"a viewer reads", "GET", "/api/items", bob, 200},
		{"asynqmon without a login", "GET", "/queues/api/queues/" + c.env.Queue, "", 401},
		{"asynqmon read by a viewer", "GET", "/queues/api/queues/" + c.env.Queue, bob, 200},
		{"asynqmon pause without a token", "POST", pause, "", 401},
		{"asynqmon pause by a viewer", "POST", pause, bob, 403},
		{"asynqmon pause by an operator", "POST", pause, alice, 204},
	} {
		if got := do(tc.method, tc.path, tc.tok, ""); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, errOut, code := c.run("enqueue", "fix", "--actor", "carol", "--input", "secret-ish text"); code != 0 {
		t.Fatalf("enqueue: %s", errOut)
	}
	if _, _, code := c.run("enqueue", "nope", "--actor", "carol"); code == 0 {
		t.Fatal("enqueue of an unknown template succeeded")
	}
	// A resolve is an action (audited, here refused: no such item); notify list only reads.
	if _, _, code := c.run("resolve", "nope@1", "--close", "--actor", "carol"); code == 0 {
		t.Fatal("resolve of an unknown item succeeded")
	}
	if _, errOut, code := c.run("notify", "list"); code != 0 {
		t.Fatalf("notify list: %s", errOut)
	}
	out, errOut, code := c.run("audit", "--json")
	if code != 0 {
		t.Fatalf("audit: %d %s", code, errOut)
	}
	var page struct {
		Entries []api.AuditEntry `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		role := string(e.Role)
		if e.Via == api.ViaCLI {
			role = "cli"
		} else {
			role += " api"
		}
		got = append(got, e.Actor+" "+role+" "+e.Action+" "+string(e.Result))
		if e.Via == api.ViaCLI && e.Result == api.AuditOK && (e.Target != "fix" || e.Detail != "--input") {
			t.Errorf("the CLI entry: target %q, detail %q (flag names only)", e.Target, e.Detail)
		}
	}
	want := "[carol cli resolve error carol cli enqueue error carol cli enqueue ok alice operator api queues:pause ok bob viewer api queues:pause refused alice operator api enqueue ok]"
	if fmt.Sprint(got) != want {
		t.Fatalf("audit entries %v, want %s", got, want)
	}
	table, _, _ := c.run("audit")
	if !strings.Contains(table, "ACTOR") || !strings.Contains(table, "queues:pause") {
		t.Fatalf("audit table:\n%s", table)
	}
	if _, errOut, code := c.run("audit", "--cursor", "bogus"); code == 0 || !strings.Contains(errOut, "--cursor") {
		t.Fatalf("a bad cursor: exit %d, %s", code, errOut)
	}
	logs, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logs), "alice (operator)") {
		t.Errorf("the startup log does not name the credentials:\n%s", logs)
	}
	for _, tok := range []string{alice, bob} {
		if strings.Contains(string(logs)+out+table, tok) {
			t.Errorf("a token appears in the log or the audit list")
		}
	}
}
