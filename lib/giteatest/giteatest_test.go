package giteatest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"outerloop/lib/testwait"
)

func TestMain(m *testing.M) { Main(m, func() error { return goleak.Find() }) }

func TestServerServesGitAndTheAPIAndDiesAtClose(t *testing.T) {
	t.Parallel()
	s, err := start(Binary(t), t.TempDir(), testwait.Deadline(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.NewRepo(t, "self")
	if strings.Contains(r.CloneURL, s.Token()) || !strings.HasPrefix(r.CloneURL, s.URL+"/") {
		t.Fatalf("clone URL %q", r.CloneURL)
	}
	dir := t.TempDir()
	s.Git(t, dir, "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Git(t, dir, "add", "a.txt")
	s.Git(t, dir, "commit", "-qm", "first")
	sha := s.Git(t, dir, "rev-parse", "HEAD")
	s.PushDir(t, dir, r, "main")
	s.PostStatus(t, r, sha, "test", "success", "all green", "http://ci/1")
	var statuses []struct {
		Context string `json:"context"`
		Status  string `json:"status"`
	}
	s.API(t, http.MethodGet, "/repos/"+r.Slug+"/commits/"+sha+"/statuses", nil, http.StatusOK, &statuses)
	if len(statuses) != 1 || statuses[0].Context != "test" || statuses[0].Status != "success" {
		t.Fatalf("statuses %+v", statuses)
	}

	// Without the token's header git is refused (the repository is private).
	cmd := exec.Command("git", "ls-remote", r.CloneURL)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("anonymous ls-remote of a private repo worked: %s", out)
	}

	pid := s.Pid()
	s.Close()
	select {
	case <-s.Exited():
	default:
		t.Fatal("Close returned before Gitea exited")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("gitea (pid %d) still runs after Close", pid)
	}
}

func TestSharedIsOneServer(t *testing.T) {
	t.Parallel()
	a, b := Shared(t), Shared(t)
	if a != b || a.URL == "" {
		t.Fatalf("Shared gave %p and %p", a, b)
	}
	if f := a.Getenv("GITEA_TOKEN"); f("GITEA_TOKEN") != a.Token() || f("OTHER") != "" {
		t.Fatal("Getenv answers only its variable")
	}
}
