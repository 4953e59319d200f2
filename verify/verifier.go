package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Request is one attempt to verify.
type Request struct {
	Template *config.Template
	// Item is the current item, with previous attempts and their decisions (for max_attempts
	// and same-failure runs).
	Item    *workitems.Item
	Attempt int // the attempt just run
	Exit    workitems.Exit
	// Workspace is the absolute directory where the done-check commands run (sh -c, own process
	// group, DoneCheck.Timeout or the default); report paths are relative to it.
	Workspace string
	// GitDir is the worker's own git directory of the workspace (proc.WorkspaceGitDir): the
	// diff evidence is read through it, never through the workspace's .git, which the item's
	// commands could have configured. "": the workspace's .git (a person's own checkout).
	GitDir string
	// BaseCommit is the git commit the attempt started from, for diff evidence; "" when the
	// workspace is not a git repository.
	BaseCommit string
	// NetworkRefused are the connections the sandbox refused to the attempt's commands
	// ("host:port (reason)"): evidence of why a failed attempt failed.
	NetworkRefused []string
	// DeferCI leaves done_check.ci out of this verification: the change is delivered through a
	// forge first and CI is read on exactly the pushed commit (VerifyPushed).
	DeferCI bool
}

// Result is the verifier's decision and the evidence summary recorded on the attempt.
type Result struct {
	Decision workitems.Decision
	Verdict  workitems.Verdict
	// Facts is the evidence behind the decision, for the CLI and tests. Unlike Decision and
	// Verdict it is not redacted: do not persist or log it whole.
	Facts *Facts
	// Files are the exact files the decision used plus replay.json (bounded: MaxEvidenceFiles,
	// MaxEvidenceFileBytes, MaxEvidenceAttemptBytes), stored by WithEvidenceStore.
	Files []EvidenceFile
}

// Verifier decides on attempts. Its zero value is not usable; call New.
type Verifier struct {
	clock workitems.Clock
	// realClock times the done-check processes, which run in real time whatever clock the
	// decisions read.
	realClock      workitems.Clock
	logger         *slog.Logger
	defaultTimeout time.Duration
	limits         Limits
	ci             map[string]CISource // by forge key, or provider webhook
	sleep          func(ctx context.Context, d time.Duration) error
	pollEvery      time.Duration
	evidence       EvidenceFileStore
	runner         *proc.Runner
	formats        *Formats
}

// WithEvidenceStore keeps each attempt's evidence files (reports, CI, diff, replay.json) so its
// decision can be replayed offline; a failure to store them is logged, not fatal.
func WithEvidenceStore(s EvidenceFileStore) Option { return func(v *Verifier) { v.evidence = s } }

// Option configures a Verifier.
type Option func(*Verifier)

// WithClock sets the clock (decision times, CI wait deadlines, transient back-off).
func WithClock(c workitems.Clock) Option { return func(v *Verifier) { v.clock = c } }

// now reads the injected clock (ci.go's callers use it).
func (v *Verifier) now() time.Time { return v.clock.Now() }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(v *Verifier) { v.logger = l } }

// WithRunner sets the runner of done-check commands (sandbox, guard); without one they run
// unconfined with the scrubbed environment.
func WithRunner(r *proc.Runner) Option { return func(v *Verifier) { v.runner = r } }

// WithFormats sets the evidence formats the verifier reads (default BuiltinFormats): a done
// check's format names one of them, and auto asks them in order.
func WithFormats(fs *Formats) Option { return func(v *Verifier) { v.formats = fs } }

// WithCI sets where CI evidence comes from for templates whose done_check.ci names source: a
// forge key (ci.forge; config resolves provider github to one) with a ForgeCI, or the provider
// "webhook" with the store EvidenceHandler writes to.
func WithCI(source string, s CISource) Option {
	return func(v *Verifier) {
		if v.ci == nil {
			v.ci = map[string]CISource{}
		}
		v.ci[source] = s
	}
}

// WithSleeper replaces the wait between CI polls (tests pass one that moves a fake clock).
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error, every time.Duration) Option {
	return func(v *Verifier) { v.sleep, v.pollEvery = sleep, every }
}

// New returns a Verifier.
func New(opts ...Option) *Verifier {
	v := &Verifier{
		clock:          workitems.SystemClock{},
		realClock:      workitems.SystemClock{},
		logger:         slog.New(slog.DiscardHandler),
		defaultTimeout: 10 * time.Minute,
		sleep:          sleepCtx,
		pollEvery:      30 * time.Second,
		formats:        BuiltinFormats(),
	}
	for _, o := range opts {
		o(v)
	}
	v.limits = v.limits.withDefaults()
	return v
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ErrNoTemplate means a request came without a template.
var ErrNoTemplate = errors.New("verify: request has no template")

// Verify decides what follows an attempt. The error is only for broken infrastructure (a temp
// file that cannot be made, a cancelled context); failing tests are a decision, not an error.
func (v *Verifier) Verify(ctx context.Context, req Request) (Result, error) {
	if req.Template == nil {
		return Result{}, ErrNoTemplate
	}
	f := &Facts{
		Exit:           req.Exit,
		Attempt:        req.Attempt,
		Item:           req.Item,
		Template:       req.Template,
		Now:            v.clock.Now(),
		NetworkRefused: req.NetworkRefused,
	}
	if req.Item != nil {
		for _, a := range req.Item.Attempts {
			if a.N == req.Attempt {
				f.Condition = a.Condition
			}
		}
	}
	if req.Exit.Reason == workitems.ExitCompleted {
		if err := v.gather(ctx, req, f); err != nil {
			return Result{}, err
		}
	}
	f.Now = v.clock.Now()
	d, vd := conclude(f)
	var files []EvidenceFile
	if f.files != nil {
		var patch []byte
		if f.Diff != nil && req.BaseCommit != "" {
			patch = diffPatch(ctx, worktree{dir: req.Workspace, gitDir: req.GitDir}, req.BaseCommit)
		}
		repo := ""
		if req.Template.DoneCheck.CI != nil {
			repo = req.Template.DoneCheck.CI.Repo
		}
		module := ""
		if f.Diff != nil {
			module = f.Diff.Module
		}
		files = f.files.finish(f, req.Template.DoneCheck.Format, repo, patch, module)
		if v.evidence != nil && req.Item != nil {
			if err := v.evidence.PutFiles(ctx, req.Item.ID, req.Attempt, files); err != nil {
				v.logger.WarnContext(ctx, "verify: evidence files not kept", slog.String("item", req.Item.ID), slog.String("error", err.Error()))
			}
		}
	}
	v.logger.LogAttrs(ctx, slog.LevelInfo, "verify decision",
		slog.String("template", req.Template.Name), slog.Int("attempt", req.Attempt),
		slog.String("outcome", string(d.Outcome)), slog.String("rule", string(d.Rule)),
		slog.String("summary", vd.Summary))
	return Result{Decision: d, Verdict: vd, Facts: f, Files: files}, nil
}

// VerifyPushed decides on the CI evidence for sha alone — the commit a delivery pushed — after
// the local check passed (Verify with DeferCI): it waits up to done_check.ci.wait for the
// required checks on exactly that SHA and applies the same policy (ci_failed retries with the
// failing checks' names and summaries in the next input, ci_missing and ci_action_required
// escalate, green closes). Checks that failed for infrastructure reasons are re-run up to
// retry.infra_retries times first.
func (v *Verifier) VerifyPushed(ctx context.Context, req Request, sha string) (Result, error) {
	if req.Template == nil {
		return Result{}, ErrNoTemplate
	}
	cfg := req.Template.DoneCheck.CI
	if cfg == nil {
		return Result{}, fmt.Errorf("verify: template %q has no done_check.ci to read on the pushed commit", req.Template.Name)
	}
	f := &Facts{Exit: req.Exit, Attempt: req.Attempt, Item: req.Item, Template: req.Template}
	if req.Item != nil {
		for _, a := range req.Item.Attempts {
			if a.N == req.Attempt {
				f.Condition = a.Condition
			}
		}
	}
	for run := 0; ; run++ {
		ci, err := v.collectCISHA(ctx, cfg, sha)
		if err != nil {
			return Result{}, err
		}
		f.CI = ci
		f.InfraProblem = infraProblem(f)
		if f.InfraProblem == "" || run >= req.Template.Retry.InfraRetries {
			f.InfraReruns = run
			break
		}
		if err := v.rerunCI(ctx, cfg, f); err != nil {
			return Result{}, err
		}
	}
	f.Now = v.clock.Now()
	d, vd := conclude(f)
	v.logger.LogAttrs(ctx, slog.LevelInfo, "verify decision on the pushed commit",
		slog.String("template", req.Template.Name), slog.Int("attempt", req.Attempt), slog.String("sha", sha),
		slog.String("outcome", string(d.Outcome)), slog.String("rule", string(d.Rule)))
	return Result{Decision: d, Verdict: vd, Facts: f}, nil
}

// gather collects the evidence; infrastructure failures re-run the check up to InfraRetries times
// (not counted as item attempts).
func (v *Verifier) gather(ctx context.Context, req Request, f *Facts) error {
	dc := req.Template.DoneCheck
	retries := req.Template.Retry.InfraRetries
	for run := 0; ; run++ {
		f.Commands, f.Reports, f.Missing, f.InfraProblem = nil, nil, nil, ""
		f.files = &evidenceSet{}
		if err := v.runCheck(ctx, dc, worktree{dir: req.Workspace, gitDir: req.GitDir}, f); err != nil {
			return err
		}
		if dc.CI != nil && !req.DeferCI {
			ci, err := v.collectCI(ctx, dc.CI, worktree{dir: req.Workspace, gitDir: req.GitDir})
			if err != nil {
				return err
			}
			f.CI = ci
		} else if dc.CI != nil && len(dc.Commands) == 0 && len(dc.Reports) == 0 {
			// CI is the only evidence and it comes after the push: the local check has nothing
			// to refuse, and VerifyPushed decides on the pushed commit's checks.
			f.CI = &CIEvidence{}
		}
		f.InfraProblem = infraProblem(f)
		if f.InfraProblem == "" || run >= retries {
			f.InfraReruns = run
			break
		}
		v.logger.LogAttrs(ctx, slog.LevelWarn, "verify: infrastructure failure, re-running the check",
			slog.String("template", req.Template.Name), slog.Int("rerun", run+1), slog.String("problem", f.InfraProblem))
		if err := v.rerunCI(ctx, dc.CI, f); err != nil {
			return err
		}
	}
	if dc.Diff != nil || req.BaseCommit != "" {
		d, err := CollectDiff(ctx, req.Workspace, req.GitDir, req.BaseCommit, dc.Diff)
		switch {
		case err == nil:
			f.Diff = d
		case ctx.Err() != nil:
			return fmt.Errorf("verify: diff: %w", ctx.Err())
		case dc.Diff != nil:
			// Limits that cannot be checked are not met: the template asked for them.
			f.Diff = &DiffEvidence{Base: req.BaseCommit, Violations: []string{"diff limits cannot be checked: " + err.Error()}}
		default:
			v.logger.WarnContext(ctx, "verify: no diff evidence", slog.String("error", err.Error()))
		}
	}
	return nil
}

func infraProblem(f *Facts) string {
	var out []string
	for _, c := range f.Commands {
		if c.Infra != "" {
			out = append(out, fmt.Sprintf("%q: %s", c.Command, c.Infra))
		}
	}
	if f.CI != nil {
		for _, ch := range f.CI.Checks {
			if ch.State == CIInfraError || ch.State == CICancelled {
				out = append(out, fmt.Sprintf("CI check %s: %s", ch.Name, ch.State))
			}
		}
	}
	return strings.Join(out, "; ")
}

// runCheck runs the done-check commands and reads the reports.
func (v *Verifier) runCheck(ctx context.Context, dc config.DoneCheck, w worktree, f *Facts) error {
	workspace := w.dir
	timeout := dc.Timeout.D()
	if timeout <= 0 {
		timeout = v.defaultTimeout
	}
	// Processes run in real time, so their deadline is real time, not the injected clock.
	deadline := v.realClock.Now().Add(timeout)
	format := dc.Format
	if format == "" {
		format = FormatAuto
	}
	f.ReportExpected = len(dc.Reports) > 0 || (format != FormatAuto && len(dc.Commands) > 0)
	for _, cmd := range dc.Commands {
		left := deadline.Sub(v.realClock.Now())
		if left <= 0 {
			f.Commands = append(f.Commands, CommandResult{Command: cmd, ExitCode: -1, TimedOut: true})
			continue
		}
		res, err := runCommand(ctx, v.runner, commandSpec(f, workspace, cmd, left), 4<<10)
		if res.Stdout != "" {
			defer os.Remove(res.Stdout)
		}
		if err != nil {
			return err
		}
		f.Commands = append(f.Commands, res)
		if len(dc.Reports) == 0 && res.Infra == "" {
			// Without report files, a command's stdout is the report when it looks like one
			// (or when the template names the format).
			rep, err := v.commandReport(res, format)
			if err != nil {
				return err
			}
			if rep != nil {
				f.Reports = append(f.Reports, rep)
				f.keep(evidenceName(len(f.Reports)-1, "stdout.txt"), res.Stdout)
			}
		}
	}
	for _, pattern := range dc.Reports {
		paths, err := reportPaths(w, pattern)
		if err != nil {
			f.Missing = append(f.Missing, err.Error())
			if f.files != nil {
				f.files.missing = append(f.files.missing, err.Error())
			}
			continue
		}
		for _, rel := range paths {
			rep, err := v.readReport(w, rel, format, f)
			if err != nil {
				f.Missing = append(f.Missing, err.Error())
				continue
			}
			rep.Source = rel
			f.Reports = append(f.Reports, rep)
		}
	}
	return nil
}

// readReport reads the report at rel in the workspace — through its os.Root, a regular file
// only (worktree.open) — keeps it with the evidence files and parses it.
func (v *Verifier) readReport(w worktree, rel string, format workitems.ReportFormat, f *Facts) (*Report, error) {
	fh, err := w.open(rel)
	if err != nil {
		return nil, fmt.Errorf("report %q: %w", rel, err)
	}
	defer fh.Close()
	if f.files != nil {
		f.files.add(evidenceName(len(f.Reports)+len(f.Missing), rel), fh)
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("report %q: %w", rel, err)
		}
	}
	return v.formats.Parse(fh, filepath.Join(w.dir, rel), format, v.limits)
}

func (v *Verifier) commandReport(res CommandResult, format workitems.ReportFormat) (*Report, error) {
	fh, err := os.Open(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("verify: output of %q: %w", res.Command, err)
	}
	defer fh.Close()
	if format == FormatAuto {
		head := make([]byte, sniffBytes)
		n, err := io.ReadFull(fh, head)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("verify: output of %q: %w", res.Command, err)
		}
		f, ok := v.formats.Detect(head[:n])
		if !ok {
			return nil, nil
		}
		format = f.Name
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("verify: output of %q: %w", res.Command, err)
		}
	}
	rep, err := v.formats.Parse(fh, res.Command, format, v.limits)
	if errors.Is(err, ErrUnknownFormat) {
		return nil, nil
	}
	return rep, err
}

// ErrPathEscapes means a report path points outside the workspace.
var ErrPathEscapes = errors.New("path escapes the workspace")

// reportPaths resolves a report path or glob to paths relative to the workspace. Directories
// are listed through w's os.Root: one that links out of the workspace is not listed (the
// names of a host directory's files never reach a decision), and the refusal names the link.
func reportPaths(w worktree, pattern string) ([]string, error) {
	if filepath.IsAbs(pattern) {
		return nil, fmt.Errorf("report %q: %w (give a path relative to the workspace)", pattern, ErrPathEscapes)
	}
	if !filepath.IsLocal(pattern) {
		return nil, fmt.Errorf("report %q: %w", pattern, ErrPathEscapes)
	}
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, fmt.Errorf("report %q: %w", pattern, err)
	}
	defer root.Close()
	matches, err := fs.Glob(root.FS(), filepath.ToSlash(filepath.Clean(pattern)))
	if err != nil {
		return nil, fmt.Errorf("report %q: bad pattern: %w", pattern, err)
	}
	if len(matches) == 0 {
		// Say why when the path, or a directory on the way, is a link out of the workspace.
		for d := filepath.Clean(pattern); d != "." && d != "/"; d = filepath.Dir(d) {
			if escapes(w.dir, d) {
				return nil, fmt.Errorf("report %q: %s: %w (a link out of the workspace)", pattern, d, ErrPathEscapes)
			}
		}
		return nil, fmt.Errorf("report %q: missing", pattern)
	}
	for i, m := range matches {
		matches[i] = filepath.FromSlash(m)
	}
	return matches, nil
}

// Check runs a template's done check in a workspace and says whether it passed, for an agent
// loop that wants to know mid-attempt. It applies the same evidence rules as Verify to the
// commands and reports; CI and the diff are left to the final verification.
func (v *Verifier) Check(ctx context.Context, tmpl *config.Template, workspace string) (passed bool, summary string, err error) {
	if tmpl == nil {
		return false, "", ErrNoTemplate
	}
	f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Template: tmpl, Now: v.clock.Now(), Attempt: 1}
	if err := v.runCheck(ctx, tmpl.DoneCheck, worktree{dir: workspace}, f); err != nil {
		return false, "", err
	}
	f.InfraProblem = infraProblem(f)
	d := decide(f)
	vd := verdict(f)
	redactResult(&d, &vd)
	return d.Outcome == workitems.OutcomeClose, vd.Summary + " — " + d.Reasons[0], nil
}

// redactResult removes secret-looking text from everything a decision records.
func redactResult(d *workitems.Decision, vd *workitems.Verdict) {
	for i := range d.Reasons {
		d.Reasons[i] = proc.Redact(d.Reasons[i])
	}
	for i := range d.Evidence {
		d.Evidence[i].Ref = proc.Redact(shorten.Clip(d.Evidence[i].Ref, 300))
		d.Evidence[i].Summary = proc.Redact(d.Evidence[i].Summary)
	}
	d.Summary, d.Cause, d.Output = proc.Redact(d.Summary), proc.Redact(d.Cause), proc.Redact(d.Output)
	if d.Next != nil {
		d.Next.Input = proc.Redact(d.Next.Input)
	}
	vd.Summary, vd.FirstError, vd.OutputTail = proc.Redact(vd.Summary), proc.Redact(vd.FirstError), proc.Redact(vd.OutputTail)
}

func evidenceRefs(f *Facts) []workitems.EvidenceRef {
	refs := []workitems.EvidenceRef{{Kind: workitems.EvidenceExit, Ref: string(f.Exit.Reason), Summary: shorten.Clip(f.Exit.Message, 200)}}
	for _, c := range f.Commands {
		s := fmt.Sprintf("exit %d in %s", c.ExitCode, c.Elapsed.Round(time.Millisecond))
		switch {
		case c.TimedOut:
			s = "timed out after " + c.Elapsed.Round(time.Millisecond).String()
		case c.Infra != "":
			s = "could not run: " + c.Infra
		case c.Limit != "":
			s = c.Limit
		}
		refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceCommand, Ref: c.Command, Summary: s})
	}
	for _, r := range f.Reports {
		refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceTestReport, Ref: r.Source, Summary: r.Summary()})
	}
	for _, m := range f.Missing {
		refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceTestReport, Ref: "missing", Summary: shorten.Clip(m, 200)})
	}
	if f.Diff != nil {
		refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceDiff, Ref: f.Diff.Base,
			Summary: fmt.Sprintf("%d files, +%d -%d", len(f.Diff.Files), f.Diff.Added, f.Diff.Deleted)})
	}
	if f.CI != nil {
		for _, ch := range f.CI.Checks {
			refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceCICheck, Ref: ch.Name, Summary: string(ch.State) + " @ " + shorten.SHA(ch.SHA)})
		}
		for _, m := range f.CI.Missing {
			refs = append(refs, workitems.EvidenceRef{Kind: workitems.EvidenceCICheck, Ref: m, Summary: "missing"})
		}
	}
	return refs
}

// verdict summarises the evidence for the attempt record.
func verdict(f *Facts) workitems.Verdict {
	var vd workitems.Verdict
	var parts []string
	for _, r := range f.Reports {
		vd.Passed += r.Observed.Passed
		vd.Failed += r.Observed.Bad()
		vd.Skipped += r.Observed.Skipped
		parts = append(parts, r.Summary())
	}
	ids := failingIDs(f)
	if len(ids) > 50 {
		ids = ids[:50]
	}
	vd.FailedTests = ids
	vd.FirstError = firstError(f)
	for _, c := range f.Commands {
		if !c.OK() {
			vd.OutputTail = shorten.Clip(c.Tail, 2048)
			parts = append(parts, fmt.Sprintf("%q exit %d", c.Command, c.ExitCode))
		}
	}
	if len(f.Missing) > 0 {
		parts = append(parts, "missing: "+missingText(f))
	}
	if f.CI != nil {
		parts = append(parts, fmt.Sprintf("CI %d/%d required green", len(f.CI.Required)-len(f.CI.failed())-len(f.CI.Missing), len(f.CI.Required)))
	}
	if f.Diff != nil {
		parts = append(parts, fmt.Sprintf("diff %d files +%d -%d", len(f.Diff.Files), f.Diff.Added, f.Diff.Deleted))
	}
	if f.Exit.Reason != workitems.ExitCompleted {
		parts = append([]string{"exit " + string(f.Exit.Reason)}, parts...)
	}
	if len(parts) == 0 && len(f.Commands) > 0 {
		parts = append(parts, fmt.Sprintf("%d commands exited 0", len(f.Commands)))
	}
	vd.Summary = shorten.Clip(strings.Join(parts, "; "), 1000)
	return vd
}

// conclude turns the facts into the decision and verdict every path records (Verify,
// VerifyPushed, the CLI and its replay): the policy's decision with its evidence, the verdict,
// the headline as the inbox shows it, redacted.
func conclude(f *Facts) (workitems.Decision, workitems.Verdict) {
	d := decide(f)
	d.Evidence = evidenceRefs(f)
	vd := verdict(f)
	d.Summary = headline(d, vd.Summary)
	explain(&d, f)
	redactResult(&d, &vd)
	return d, vd
}
