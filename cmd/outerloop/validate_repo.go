package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"outerloop/forge"
)

// checkForgeRepo checks that a remote repo on one of the configured forges can be read with
// that forge's token, as the worker's mirror reads it (git ls-remote with the token in an
// http.extraHeader given through the environment). ok is false when the repo is on no forge:
// the caller checks it anonymously. The token is never printed: problems name its variable.
func checkForgeRepo(ctx context.Context, v *validation, repo, who string, prefer []string) (ok bool) {
	name, found := forge.ForRepo(v.cfg.Forges, repo, prefer...)
	if !found {
		return false
	}
	fc := v.cfg.Forges[name]
	tok := os.Getenv(fc.TokenEnv)
	var auth forge.GitAuth
	cred := fmt.Sprintf("anonymously ($%s of forge %s is not set)", fc.TokenEnv, name)
	if tok != "" {
		a, err := forge.NewGitAuth(repo, tok)
		if err != nil {
			v.problems = append(v.problems, fmt.Sprintf("%s: repo %q: %v", who, repo, err))
			return true
		}
		auth, cred = a, fmt.Sprintf("with the token of forge %s ($%s)", name, fc.TokenEnv)
	}
	env := append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	c := forge.CheckRead(ctx, repo, auth, env, lsRemoteTimeout)
	if c.OK {
		v.info = append(v.info, fmt.Sprintf("repo %q: readable %s", repo, cred))
		return true
	}
	var why []string
	if a := forge.ReadAdvice(c.Status, tok != "", fc.TokenEnv); a != "" {
		why = append(why, a)
	}
	if c.Message != "" {
		why = append(why, "git: "+c.Message)
	}
	v.problems = append(v.problems, fmt.Sprintf("%s: repo %q: cannot be read %s: %s", who, repo, cred, strings.Join(why, "; ")))
	return true
}
