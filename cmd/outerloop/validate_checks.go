package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"outerloop/forge"
	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The checks of what can go wrong before a run, beside the sandbox's. Each adds every problem
// it finds (not only the first), naming the template and field.

// lsRemoteTimeout bounds how long validate waits for one remote to answer.
const lsRemoteTimeout = 15 * time.Second

// isRemote says whether a template's repo is a remote (cloned) rather than a local path; the
// worker tells them apart the same way (worker.Workspaces.resolve).
func isRemote(repo string) bool {
	return strings.Contains(repo, "://") || strings.HasPrefix(repo, "git@")
}

// resolveRepo is a local repo path as the worker resolves it (relative to the config's dir).
func resolveRepo(cfg *config.Config, repo string) string {
	if repo == "" || isRemote(repo) || filepath.IsAbs(repo) {
		return repo
	}
	return filepath.Join(cfg.Dir, repo)
}

// checkRepos: every local repo path exists, and every remote answers `git ls-remote` in time:
// a repo on a configured forge with that forge's token (checkForgeRepo), as the worker's mirror
// reads it; any other remote with the host's own git setup. Each repo is checked once however
// many templates name it. git runs directly (not through the sandboxed runner).
func checkRepos(ctx context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	users := map[string][]string{}
	forges := map[string][]string{} // the forges the repo's templates name, for checkForgeRepo
	var order []string
	for i, t := range v.cfg.Templates {
		repos := t.Repos // a fleet's listed repositories (repos_from is listed at its ticks)
		if t.Repo != "" {
			repos = []string{t.Repo}
		}
		for _, repo := range repos {
			if _, ok := users[repo]; !ok {
				order = append(order, repo)
			}
			users[repo] = append(users[repo], t.Name)
			forges[repo] = append(forges[repo], forge.TemplateForges(&v.cfg.Templates[i])...)
		}
	}
	for _, repo := range order {
		who := templatesList(users[repo])
		if isRemote(repo) && checkForgeRepo(ctx, v, repo, who, forges[repo]) {
			continue
		}
		if isRemote(repo) {
			cctx, cancel := context.WithTimeout(ctx, lsRemoteTimeout)
			out, err := proc.Git{Env: append(os.Environ(), "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=10")}.
				Combined(cctx, nil, "ls-remote", "--heads", "--", repo)
			cancel()
			if err != nil {
				var ge *proc.GitError
				if errors.As(err, &ge) {
					err = ge.Err
				}
				msg := strings.TrimSpace(shorten.LastLine(proc.Redact(string(out))))
				if cctx.Err() != nil {
					msg = fmt.Sprintf("no answer within %s", lsRemoteTimeout)
				}
				v.problems = append(v.problems, fmt.Sprintf("%s: repo %q: remote does not answer git ls-remote: %s", who, repo, firstNonEmpty(msg, err.Error())))
				continue
			}
			v.info = append(v.info, fmt.Sprintf("repo %q: remote answers", repo))
			continue
		}
		path := resolveRepo(v.cfg, repo)
		st, err := os.Stat(path)
		switch {
		case err != nil:
			v.problems = append(v.problems, fmt.Sprintf("%s: repo %q: %s does not exist", who, repo, path))
		case !st.IsDir():
			v.problems = append(v.problems, fmt.Sprintf("%s: repo %q: %s is not a directory", who, repo, path))
		default:
			v.info = append(v.info, fmt.Sprintf("repo %q: %s exists", repo, path))
		}
	}
}

// isShellWord says whether a command may start with w without w being a binary to look up.
func isShellWord(w string) bool {
	switch w {
	case "!", ".", ":", "[", "[[", "alias", "bg", "break", "case", "cd", "command", "continue", "echo",
		"eval", "exec", "exit", "export", "false", "fg", "for", "function", "if", "jobs", "kill", "local", "printf",
		"pwd", "read", "readonly", "return", "set", "shift", "source", "test", "time", "trap", "true", "type",
		"ulimit", "umask", "unset", "until", "wait", "while", "{", "(", "((":
		return true
	}
	return false
}

// commandBinary is the binary a shell command line starts with ("" when it starts with a shell
// word or is not a plain word: validate cannot know then).
func commandBinary(line string) string {
	for _, w := range strings.Fields(line) {
		if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") && !strings.ContainsAny(w, "/$`") {
			continue // VAR=value before the command
		}
		if isShellWord(w) || strings.ContainsAny(w, "$`\"'|&;<>(){}*?") {
			return ""
		}
		return w
	}
	return ""
}

// checkBinaries: the binaries that done-check commands and loops start (the programs each loop
// kind's traits list: script steps, an exec agent) are on PATH (or, written as a path, exist in
// the local repo or on the host).
func checkBinaries(_ context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	loops := v.loops
	if loops == nil {
		loops = config.BuiltinLoopKinds() // the kinds this binary's config load knows
	}
	seen := map[string]bool{}
	for _, t := range v.cfg.Templates {
		check := func(field, line string, exact bool) {
			bin := line
			if !exact {
				bin = commandBinary(line)
			}
			if bin == "" {
				return
			}
			key := t.Repo + "\x00" + bin
			if !strings.Contains(bin, "/") && seen[key] {
				return
			}
			seen[key] = true
			if problem := binaryProblem(v.cfg, t.Repo, bin); problem != "" {
				v.problems = append(v.problems, fmt.Sprintf("template %q: %s: %q: %s", t.Name, field, line, problem))
			}
		}
		for i, c := range t.DoneCheck.Commands {
			check(fmt.Sprintf("done_check.commands[%d]", i), c, false)
		}
		if traits, _ := loops.LoopTraits(t.Loop.Kind); traits.Programs != nil {
			for _, p := range traits.Programs(&t) {
				check(p.Field, p.Command, p.Exact)
			}
		}
	}
}

// binaryProblem says why bin would not start ("" when it would, or cannot be known before a
// run: a relative path in a remote repo).
func binaryProblem(cfg *config.Config, repo, bin string) string {
	if !strings.Contains(bin, "/") {
		if _, err := exec.LookPath(bin); err != nil {
			return "not found on PATH"
		}
		return ""
	}
	path := bin
	if !filepath.IsAbs(bin) {
		if isRemote(repo) || repo == "" {
			return "" // in a clone made at run time
		}
		path = filepath.Join(resolveRepo(cfg, repo), bin)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("%s does not exist", path)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Sprintf("%s is not executable", path)
	}
	return ""
}

// checkTokens: the environment variables holding provider keys, forge tokens and templates'
// trigger secrets are set.
// Only their names are ever printed.
func checkTokens(_ context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	users := map[string][]string{}
	for _, t := range v.cfg.Templates {
		if t.Loop.Provider != "" {
			users[t.Loop.Provider] = append(users[t.Loop.Provider], t.Name)
		}
	}
	for _, name := range sortedKeys(v.cfg.Providers) {
		p := v.cfg.Providers[name]
		if p.Kind == workitems.ProviderReplay || p.APIKeyEnv == "" {
			continue
		}
		if os.Getenv(p.APIKeyEnv) == "" {
			used := "no template uses it"
			if len(users[name]) > 0 {
				used = "used by " + templatesList(users[name])
			}
			v.problems = append(v.problems, fmt.Sprintf("providers.%s.api_key_env: %s is not set (%s)", name, p.APIKeyEnv, used))
		} else {
			v.info = append(v.info, fmt.Sprintf("providers.%s: %s is set", name, p.APIKeyEnv))
		}
	}
	for _, t := range v.cfg.Templates {
		at, ok := t.APITrigger()
		if !ok {
			continue
		}
		// The error names the variable or file, never the secret.
		if _, err := at.Secret(os.Getenv); err != nil {
			v.problems = append(v.problems, fmt.Sprintf("template %q: triggers api: %v: POST /api/templates/%s/trigger answers 503", t.Name, err, t.Name))
		} else {
			v.info = append(v.info, fmt.Sprintf("template %q: its trigger secret is set: POST /api/templates/%s/trigger", t.Name, t.Name))
		}
	}
	for _, name := range sortedKeys(v.cfg.Forges) {
		f := v.cfg.Forges[name]
		switch {
		case f.WebhookSecretEnv == "":
			v.info = append(v.info, fmt.Sprintf("forges.%s: no webhook_secret_env: POST /hooks/%s answers 403; waiting items are woken by polling", name, name))
		case os.Getenv(f.WebhookSecretEnv) == "":
			v.problems = append(v.problems, fmt.Sprintf("forges.%s.webhook_secret_env: %s is not set: every webhook delivery to /hooks/%s is refused", name, f.WebhookSecretEnv, name))
		default:
			v.info = append(v.info, fmt.Sprintf("forges.%s: %s is set: webhooks at POST /hooks/%s", name, f.WebhookSecretEnv, name))
		}
		if f.TokenEnv == "" {
			continue
		}
		if os.Getenv(f.TokenEnv) == "" {
			v.problems = append(v.problems, fmt.Sprintf("forges.%s.token_env: %s is not set", name, f.TokenEnv))
		} else {
			v.info = append(v.info, fmt.Sprintf("forges.%s: %s is set", name, f.TokenEnv))
		}
	}
}

// checkSchedules prints each scheduled template's next runs (in UTC, as the scheduler runs).
func checkSchedules(_ context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	now := clock.Now().UTC()
	for _, t := range v.cfg.Templates {
		if t.Schedule == "" {
			continue
		}
		sc, err := cron.ParseStandard(t.Schedule)
		if err != nil { // the config's own validation refuses it first
			v.problems = append(v.problems, fmt.Sprintf("template %q: schedule %q: %v", t.Name, t.Schedule, err))
			continue
		}
		var next []string
		for at, i := now, 0; i < 3; i++ {
			at = sc.Next(at)
			if at.IsZero() {
				break
			}
			next = append(next, at.Format(time.RFC3339))
		}
		v.info = append(v.info, fmt.Sprintf("template %q: schedule %q: next %s", t.Name, t.Schedule, strings.Join(next, ", ")))
	}
}

func templatesList(names []string) string {
	const most = 5
	if len(names) == 1 {
		return fmt.Sprintf("template %q", names[0])
	}
	shown := names
	if len(shown) > most {
		shown = shown[:most]
	}
	s := "templates " + strings.Join(quoteAll(shown), ", ")
	if len(names) > most {
		s += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return s
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
