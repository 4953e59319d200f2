package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/lib/giteatest"
)

// validate reads a private repository of a real Gitea with its forge's token (found by the
// repo URL's origin), and without a usable token names the template, the repo, the HTTP
// status and what to fix, never printing the token.
func TestValidateChecksReadAccessOfAPrivateRepoWithItsForgesToken(t *testing.T) {
	gs := giteatest.Start(t)
	r := gs.NewRepo(t, "validate")
	dir := t.TempDir()
	path := filepath.Join(dir, "outerloop.yaml")
	cfg := fmt.Sprintf(`defaults:
  budget: {wall_time: 1m}
sandbox: {mode: off}
forges:
  tea: {kind: gitea, base_url: %q, token_env: OLVT_TEA_TOKEN}
templates:
  - name: private
    goal: g
    repo: %s
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["sh -c true"]}
`, gs.URL, r.CloneURL)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	wrong := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name, token string
		code        int
		want        string
	}{
		{"token", gs.Token(), 0, fmt.Sprintf(`repo %q: readable with the token of forge tea ($OLVT_TEA_TOKEN)`, r.CloneURL)},
		{"unset", "", 1, fmt.Sprintf(`problem: template "private": repo %q: cannot be read anonymously ($OLVT_TEA_TOKEN of forge tea is not set): `+
			`HTTP 401: the repository needs credentials: set $OLVT_TEA_TOKEN to a token that can read it`, r.CloneURL)},
		{"wrong", wrong, 1, fmt.Sprintf(`problem: template "private": repo %q: cannot be read with the token of forge tea ($OLVT_TEA_TOKEN): `+
			`HTTP 401: the forge refused the token in $OLVT_TEA_TOKEN`, r.CloneURL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OLVT_TEA_TOKEN", tc.token)
			out, err := runRoot(t, "--config", path, "validate")
			var ee exitError
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("validate: %v, want exit 0", err)
			case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code):
				t.Errorf("validate: %v, want exit %d", err, tc.code)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("validate output lacks %q", tc.want)
			}
			for _, secret := range []string{gs.Token(), wrong} {
				if strings.Contains(out, secret) {
					t.Error("validate printed a token")
				}
			}
			if t.Failed() {
				t.Log(out)
			}
		})
	}
}
