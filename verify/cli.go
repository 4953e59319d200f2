package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// CLIOptions is everything `outerloop verify` is told besides the report files: with them, a
// decision taken on an item can be replayed offline from its evidence files.
type CLIOptions struct {
	Format   workitems.ReportFormat // auto (default) or one of Formats
	Formats  *Formats               // the formats read (nil: BuiltinFormats)
	Template *config.Template       // decide as this template (nil: a plain done check)
	ExitCode *int                   // the test command's exit status (--exit-code); nil: not given
	CIFile   string                 // a POST /api/evidence body (--ci)
	DiffFile string                 // a unified diff against the base commit (--diff)
	JSON     bool                   // print the whole verdict as one JSON document (--json)
	Missing  []string               // expected reports that matched no file (a replay manifest's)
	Module   string                 // Go module of the workspace, relating flaky tests to --diff
	ExitName string                 // the command ExitCode came from (a replay manifest's)
	ExitTail string                 // the end of that command's output (a replay manifest's)
	Clock    workitems.Clock        // the policy's now (nil: the system clock)
}

// CLIVerdict is what `outerloop verify --json` prints.
type CLIVerdict struct {
	Decision workitems.Decision `json:"decision"`
	Verdict  workitems.Verdict  `json:"verdict"`
	Reports  []*Report          `json:"reports"`
	Missing  []string           `json:"missing,omitempty"`
	Commands []CommandResult    `json:"commands,omitempty"`
	CI       *CIEvidence        `json:"ci,omitempty"`
	Diff     *DiffEvidence      `json:"diff,omitempty"`
}

// RunCLI parses report files and prints what they show and the decision the template (or the
// default policy) would take, ending with exactly one line
// "decision: close|retry|escalate — <reason>" (or, with JSON, one CLIVerdict document).
// exitCode is 0 only for close, so the command can gate other CI. err is for bad options (an
// unknown format, an unreadable or invalid --ci or --diff file) or a failing writer;
// unreadable or unrecognisable reports are evidence (missing), not errors.
func RunCLI(ctx context.Context, w io.Writer, files []string, opt CLIOptions) (exitCode int, err error) {
	format := opt.Format
	if format == "" {
		format = FormatAuto
	}
	formats := opt.Formats
	if formats == nil {
		formats = BuiltinFormats()
	}
	if err := formats.check(format); err != nil {
		return 2, err
	}
	tmpl := opt.Template
	if tmpl == nil {
		tmpl = &config.Template{Name: "cli", MaxAttempts: 3, Retry: config.Retry{SameFailureLimit: 2}}
	}
	clock := opt.Clock
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, Template: tmpl,
		Now: clock.Now(), ReportExpected: len(files) > 0 || len(tmpl.DoneCheck.Reports) > 0}
	if opt.ExitCode != nil {
		f.Commands = append(f.Commands, CommandResult{Command: cmp.Or(opt.ExitName, "the test command (--exit-code)"),
			ExitCode: *opt.ExitCode, Tail: opt.ExitTail})
	}
	if opt.CIFile != "" {
		fh, err := os.Open(opt.CIFile)
		if err != nil {
			return 2, fmt.Errorf("verify: --ci: %w", err)
		}
		f.CI, err = ciFromPayload(fh, tmpl.DoneCheck.CI)
		fh.Close()
		if err != nil {
			return 2, err
		}
	}
	if opt.DiffFile != "" {
		fh, err := os.Open(opt.DiffFile)
		if err != nil {
			return 2, fmt.Errorf("verify: --diff: %w", err)
		}
		f.Diff, err = ParsePatch(fh, "", tmpl.DoneCheck.Diff)
		fh.Close()
		if err != nil {
			return 2, err
		}
		f.Diff.Module = opt.Module
	}
	pw := &errWriter{w: w}
	text := &errWriter{w: io.Discard}
	if !opt.JSON {
		text = pw
	}
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return 2, fmt.Errorf("verify: %w", err)
		}
		rep, err := formats.ParseFile(file, format, Limits{})
		if err != nil {
			f.Missing = append(f.Missing, err.Error())
			text.printf("%s: %v\n", file, err)
			continue
		}
		f.Reports = append(f.Reports, rep)
		printReport(text, rep)
	}
	f.Missing = append(f.Missing, opt.Missing...)
	if len(files) == 0 && opt.ExitCode == nil && opt.CIFile == "" && len(opt.Missing) == 0 {
		f.Missing = append(f.Missing, "no report files given")
	}
	d, vd := conclude(f)
	if opt.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(CLIVerdict{Decision: d, Verdict: vd, Reports: f.Reports, Missing: f.Missing,
			Commands: f.Commands, CI: f.CI, Diff: f.Diff}); err != nil {
			return 2, fmt.Errorf("verify: writing: %w", err)
		}
	} else {
		reason := d.Reasons[0]
		if len(d.Reasons) > 1 && d.Rule != "" && d.Outcome == workitems.OutcomeEscalate {
			reason = d.Reasons[len(d.Reasons)-1]
		}
		pw.printf("decision: %s — %s\n", d.Outcome, oneLine(reason))
	}
	if pw.err != nil {
		return 2, fmt.Errorf("verify: writing: %w", pw.err)
	}
	if d.Outcome == workitems.OutcomeClose {
		return 0, nil
	}
	return 1, nil
}

func printReport(w *errWriter, r *Report) {
	w.printf("%s\n", r.Summary())
	if r.Flavor != "" {
		w.printf("  flavor: %s\n", r.Flavor)
	}
	if len(r.Conventions) > 0 {
		w.printf("  conventions: %s\n", strings.Join(r.Conventions, ", "))
	}
	d := r.Declared
	if d.Total >= 0 {
		w.printf("  declared: %d tests", d.Total)
		if d.Failed >= 0 {
			w.printf(", %d failures", d.Failed)
		}
		if d.Errored >= 0 {
			w.printf(", %d errors", d.Errored)
		}
		if d.Skipped >= 0 {
			w.printf(", %d skipped", d.Skipped)
		}
		if ok, why := r.CountsAgree(); !ok {
			w.printf(" (disagrees: %s)", why)
		}
		w.printf("\n")
	}
	for _, e := range r.BuildErrors[:min(len(r.BuildErrors), 5)] {
		w.printf("  build: %s\n", e)
	}
	n := 0
	for _, t := range r.Tests {
		if !t.Final().Bad() {
			continue
		}
		if n++; n > 20 {
			w.printf("  … and %d more failing\n", r.Observed.Bad()-20)
			break
		}
		msg := ""
		if b := t.FirstBad(); b != nil && b.Message != "" {
			msg = ": " + oneLine(b.Message)
		}
		w.printf("  %s %s%s\n", strings.ToUpper(string(t.Final())), t.ID, msg)
	}
	for _, t := range r.FlakyTests() {
		w.printf("  FLAKY %s (failed, then passed)\n", t.ID)
	}
	for _, warn := range r.Warnings[:min(len(r.Warnings), 5)] {
		w.printf("  warning: %s\n", oneLine(warn))
	}
}

func oneLine(s string) string { return shorten.OneLine(s, 300) }

// errWriter remembers the first write error so printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
