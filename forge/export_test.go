package forge

import "testing"

// What the external tests (package forge_test: the publisher against GitHub) use of the fake.

// FakeGitHub is fakeGitHub for external tests.
type FakeGitHub = fakeGitHub

// NewFakeGitHub is newFakeGitHub.
func NewFakeGitHub(t *testing.T, token string) *FakeGitHub { return newFakeGitHub(t, token) }

// APIURL is the REST API root.
func (f *fakeGitHub) APIURL() string { return f.api.URL }

// Bare is the git remote's bare repository on disk.
func (f *fakeGitHub) Bare() string { return f.bare }

// BranchSHA is the remote's commit for a branch.
func (f *fakeGitHub) BranchSHA(branch string) string { return f.branchSHA(branch) }

// AddCheckRun records a completed check run for sha, as a GitHub App would post it.
func (f *fakeGitHub) AddCheckRun(name, sha, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, checkRun(len(f.runs)+1, name, sha, "completed", conclusion, f.now))
}

// Pulls returns the pull requests: number, state, merged, head sha, labels.
func (f *fakeGitHub) Pulls() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.pulls...)
}

// Labels and Comments of pull request n.
func (f *fakeGitHub) Labels(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.labels[n]...)
}

// GitAuthSeen is the Authorization headers the git remote saw.
func (f *fakeGitHub) GitAuthSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.gitAuth...)
}
