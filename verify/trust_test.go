package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/hostilegit"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// memEvidence keeps evidence files in memory.
type memEvidence struct{ files []EvidenceFile }

func (m *memEvidence) PutFiles(_ context.Context, _ string, _ int, f []EvidenceFile) error {
	m.files = append(m.files, f...)
	return nil
}
func (m *memEvidence) Files(context.Context, string, int) ([]EvidenceFile, error) {
	return m.files, nil
}

// hostileWorkspace is a workspace as the worker keeps one (its own git directory beside the
// tree) after a hostile step: every git setting that runs a program planted in the tree's
// .git, and a secret file on the host the step would like to read.
func hostileWorkspace(t *testing.T) (ws, gitDir, base, markers, secret string) {
	t.Helper()
	ws, base = gitRepo(t, map[string]string{"README": "base\n"})
	gitDir = proc.WorkspaceGitDir(ws)
	if out, err := exec.Command("cp", "-r", ws+"/.git", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	markers, hostDir := t.TempDir(), t.TempDir()
	secret = filepath.Join(hostDir, "secret.xml")
	writeFiles(t, hostDir, map[string]string{"secret.xml": `<testsuite name="s" tests="1"><testcase name="canary-7f3e"/></testsuite>`})
	hostilegit.Plant(t, ws, markers, hostDir)
	return ws, gitDir, base, markers, secret
}

// The verifier's diff evidence reads the worker's git directory: the item's diff drivers,
// textconv, external diff and fsmonitor run nothing.
func TestTheVerifiersDiffRunsNothingTheItemWroteIntoItsGit(t *testing.T) {
	t.Parallel()
	ws, gitDir, base, markers, _ := hostileWorkspace(t)
	writeFiles(t, ws, map[string]string{"README": "changed\n", "new.go": "package x\n"})
	store := &memEvidence{}
	v := New(WithClock(fakeclock.New(testNow)), WithEvidenceStore(store))
	tmpl := &config.Template{Name: "fix", MaxAttempts: 3, DoneCheck: config.DoneCheck{Commands: []string{"true"},
		Diff: &config.DiffCheck{MaxFiles: 10}, Timeout: workitems.Duration(time.Minute)}}
	res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
		Exit: completed(), Workspace: ws, GitDir: gitDir, BaseCommit: base})
	if err != nil {
		t.Fatal(err)
	}
	if fired := hostilegit.Fired(t, markers); len(fired) > 0 {
		t.Fatalf("the verifier ran the item's programs on the host: %v", fired)
	}
	var paths []string
	for _, f := range res.Facts.Diff.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "README .gitattributes new.go" {
		t.Fatalf("diff evidence %v, want the work tree's three changes", paths)
	}
}

// A report is read from the workspace only: a report, or its directory, that links out of it
// is refused by name and its target never read; a FIFO is refused without a wait; an
// untracked link to a host file is not followed into the diff evidence.
func TestReportsAndUntrackedFilesAreReadOnlyInsideTheWorkspace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(t *testing.T, ws, secret string)
		want  string // in the decision's reasons
	}{
		{"a report that links to a host file", func(t *testing.T, ws, secret string) {
			mkdir(t, filepath.Join(ws, "out"))
			symlink(t, secret, filepath.Join(ws, "out", "report.xml"))
		}, "out/report.xml"},
		{"a report directory that links to a host directory", func(t *testing.T, ws, secret string) {
			symlink(t, filepath.Dir(secret), filepath.Join(ws, "out"))
			symlink(t, "secret.xml", filepath.Join(filepath.Dir(secret), "report.xml"))
		}, `"out/*.xml": out: path escapes`},
		{"a report that is a FIFO", func(t *testing.T, ws, _ string) {
			mkdir(t, filepath.Join(ws, "out"))
			if err := syscall.Mkfifo(filepath.Join(ws, "out", "report.xml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "out/report.xml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, gitDir, base, markers, secret := hostileWorkspace(t)
			c.plant(t, ws, secret)
			symlink(t, secret, filepath.Join(ws, "leak.xml")) // untracked: counted, never read
			store := &memEvidence{}
			v := New(WithClock(fakeclock.New(testNow)), WithEvidenceStore(store))
			tmpl := &config.Template{Name: "fix", MaxAttempts: 3, DoneCheck: config.DoneCheck{Commands: []string{"true"},
				Reports: []string{"out/*.xml"}, Diff: &config.DiffCheck{MaxFiles: 10}, Timeout: workitems.Duration(time.Minute)}}
			res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
				Exit: completed(), Workspace: ws, GitDir: gitDir, BaseCommit: base})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision.Outcome == workitems.OutcomeClose {
				t.Fatalf("closed on a report from outside the workspace: %s %v", res.Decision.Rule, res.Decision.Reasons)
			}
			if why := strings.Join(res.Decision.Reasons, " "); !strings.Contains(why, c.want) {
				t.Fatalf("the decision (%s) does not name %s: %q", res.Decision.Rule, c.want, why)
			}
			for _, f := range store.files {
				if strings.Contains(string(f.Data), "canary-7f3e") {
					t.Fatalf("evidence file %s holds the host file's contents:\n%s", f.Name, f.Data)
				}
			}
			if why := strings.Join(res.Decision.Reasons, " "); strings.Contains(why, "canary-7f3e") || strings.Contains(why, "secret.xml") {
				t.Fatalf("the decision holds the host file's contents or name: %v", res.Decision.Reasons)
			}
			if fired := hostilegit.Fired(t, markers); len(fired) > 0 {
				t.Fatalf("the verifier ran the item's programs on the host: %v", fired)
			}
		})
	}
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// A workspace reached through a link (a work dir on another disk, linked into place) is read
// as usual: its own reports are read, and a report that links out of it is still refused.
func TestAWorkspaceReachedThroughALinkIsReadInsideItOnly(t *testing.T) {
	t.Parallel()
	ws, gitDir, base, markers, secret := hostileWorkspace(t)
	linked := filepath.Join(t.TempDir(), "ws-link")
	symlink(t, ws, linked)
	if err := os.Symlink(gitDir, linked+".git"); err != nil {
		t.Fatal(err)
	}
	green, err := os.ReadFile(filepath.Join("testdata", "junit", "ctest-green.xml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"out/good.xml": string(green)})
	tmpl := &config.Template{Name: "fix", MaxAttempts: 3, DoneCheck: config.DoneCheck{Commands: []string{"true"},
		Reports: []string{"out/*.xml"}, Timeout: workitems.Duration(time.Minute)}}
	verifyIn := func() Result {
		t.Helper()
		res, err := New(WithClock(fakeclock.New(testNow))).Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}),
			Attempt: 1, Exit: completed(), Workspace: linked, GitDir: linked + ".git", BaseCommit: base})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := verifyIn(); res.Decision.Outcome != workitems.OutcomeClose {
		t.Fatalf("a green report in a linked workspace: %s %v", res.Decision.Rule, res.Decision.Reasons)
	}
	symlink(t, secret, filepath.Join(ws, "out", "stolen.xml"))
	res := verifyIn()
	if res.Decision.Outcome == workitems.OutcomeClose || !strings.Contains(strings.Join(res.Decision.Reasons, " "), "out/stolen.xml") {
		t.Fatalf("a report linking out of a linked workspace: %s %v", res.Decision.Rule, res.Decision.Reasons)
	}
	if fired := hostilegit.Fired(t, markers); len(fired) > 0 {
		t.Fatalf("the verifier ran the item's programs on the host: %v", fired)
	}
}
