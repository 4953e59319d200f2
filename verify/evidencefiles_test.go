package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestEvidenceFilesReplay: the verifier keeps the exact files a decision used, in Redis, served
// over HTTP; written to a directory, they replay to the same decision with `outerloop verify`.
func TestEvidenceFilesReplay(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	store := NewRedisEvidenceStore(env.Client, env.Prefix, time.Hour)
	mux := http.NewServeMux()
	h := EvidenceFilesHandler(store)
	mux.Handle("GET /api/items/{id}/attempts/{n}/evidence", h)
	mux.Handle("GET /api/items/{id}/attempts/{n}/evidence/{name}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ws := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "-q")
	write(t, filepath.Join(ws, "README"), "base\n")
	gitRun("add", ".")
	gitRun("commit", "-q", "-m", "base")
	base, err := exec.Command("git", "-C", ws, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "pay.go"), "package pay\n")
	copyFixture := func(fixture, to string) {
		b, err := os.ReadFile(filepath.Join("testdata", fixture))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(ws, to), string(b))
	}

	cases := []struct {
		name     string
		fixture  string
		cmd      string
		allowed  []string
		wantRule workitems.RuleName
	}{
		{"real failures retry", "junit/pytest-teardown.xml", "exit 1", nil, "tests_failed"},
		{"a green report from a command that exited 1", "junit/jest-todo.xml", "exit 1", nil, "command_failed"},
		{"green", "junit/ctest-green.xml", "true", nil, "all_green"},
		{"out of scope", "junit/ctest-green.xml", "true", []string{"docs/**"}, "diff_out_of_scope"},
		{"a secret in the diff", "junit/ctest-green.xml", "true", nil, "diff_secret"},
	}
	for i, c := range cases {
		name := "out/report.xml"
		if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFixture(c.fixture, name)
		if c.wantRule == "diff_secret" {
			write(t, filepath.Join(ws, "pay.go"), "package pay\n\nconst key = \"AKIAABCDEFGHIJKLMNOP\"\n")
		}
		tmpl := &config.Template{Name: "fix", MaxAttempts: 3, DoneCheck: config.DoneCheck{
			Commands: []string{c.cmd}, Reports: []string{"out/*.xml"}, Timeout: workitems.Duration(time.Minute)}}
		if c.allowed != nil {
			tmpl.DoneCheck.Diff = &config.DiffCheck{AllowedPaths: c.allowed}
		}
		it := &workitems.Item{ID: "fix@" + string(rune('a'+i)), Template: "fix", Attempts: []workitems.Attempt{{N: 1}}, Attempt: 1}
		v := New(WithClock(fakeclock.New(testNow)), WithEvidenceStore(store))
		res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: it, Attempt: 1, Exit: completed(),
			Workspace: ws, BaseCommit: strings.TrimSpace(string(base))})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != c.wantRule {
			t.Fatalf("%s: rule %s (%q), want %s", c.name, res.Decision.Rule, res.Decision.Reasons, c.wantRule)
		}
		// The list, then each file, over HTTP.
		var list struct {
			Files []EvidenceFile `json:"files"`
		}
		get(t, srv.URL+"/api/items/"+it.ID+"/attempts/1/evidence", &list)
		if len(list.Files) < 3 { // report, diff, manifest
			t.Fatalf("%s: evidence files %+v", c.name, list.Files)
		}
		dir := t.TempDir()
		for _, f := range list.Files {
			var raw bytes.Buffer
			get(t, srv.URL+"/api/items/"+it.ID+"/attempts/1/evidence/"+f.Name, &raw)
			if strings.Contains(raw.String(), "AKIAABCDEFGHIJKLMNOP") {
				t.Errorf("%s: evidence file %s keeps the secret", c.name, f.Name)
			}
			write(t, filepath.Join(dir, f.Name), raw.String())
		}
		var out bytes.Buffer
		opt := CLIOptions{JSON: true, Template: tmpl}
		if _, err := ReplayDir(context.Background(), &out, dir, opt); err != nil {
			t.Fatalf("%s: replay: %v", c.name, err)
		}
		var replay CLIVerdict
		if err := json.Unmarshal(out.Bytes(), &replay); err != nil {
			t.Fatal(err)
		}
		if replay.Decision.Outcome != res.Decision.Outcome || replay.Decision.Rule != res.Decision.Rule {
			t.Errorf("%s: replay decided %s/%s, the verifier %s/%s", c.name, replay.Decision.Outcome, replay.Decision.Rule,
				res.Decision.Outcome, res.Decision.Rule)
		}
		if res.Decision.Next != nil && (replay.Decision.Next == nil || replay.Decision.Next.Input != res.Decision.Next.Input) {
			t.Errorf("%s: replay's retry input differs", c.name)
		}
	}
	resp, err := http.Get(srv.URL + "/api/items/fix@a/attempts/1/evidence/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown file: status %d, want 404", resp.StatusCode)
	}
}

func get(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if buf, ok := into.(*bytes.Buffer); ok {
		_, _ = io.Copy(buf, resp.Body)
		return
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

// TestEvidenceSetBounds: files beyond the per-file bound are cut and marked, beyond the count
// or the attempt total dropped and listed in the manifest.
func TestEvidenceSetBounds(t *testing.T) {
	t.Parallel()
	var s evidenceSet
	s.add("big", bytes.NewReader(make([]byte, MaxEvidenceFileBytes+10)))
	if len(s.files) != 1 || !s.files[0].Truncated || len(s.files[0].Data) != MaxEvidenceFileBytes || s.files[0].Size != MaxEvidenceFileBytes+10 {
		t.Fatalf("big file: %+v", s.files[0].Size)
	}
	for i := 0; i < 40; i++ {
		s.add("f", bytes.NewReader(make([]byte, 512<<10)))
	}
	if s.total > MaxEvidenceAttemptBytes || len(s.files) > MaxEvidenceFiles-1 || len(s.dropped) == 0 {
		t.Fatalf("bounds: %d files, %d bytes, %d dropped", len(s.files), s.total, len(s.dropped))
	}
	files := s.finish(&Facts{}, "", "", nil, "")
	var rp Replay
	if err := json.Unmarshal(files[len(files)-1].Data, &rp); err != nil || len(rp.Dropped) == 0 {
		t.Fatalf("manifest %+v %v: want the dropped files listed", rp, err)
	}
}
