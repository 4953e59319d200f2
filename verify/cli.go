package verify

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"outerloop/workitems"
)

// RunCLI parses report files and prints what they show and the decision tmpl (or the default
// policy when nil) would take, ending with exactly one line
// "decision: close|retry|escalate — <reason>". exitCode is 0 only for close, so the command
// can gate other CI. err is for a bad format name or a failing writer; unreadable or
// unrecognisable reports are evidence (missing), not errors.
func RunCLI(ctx context.Context, w io.Writer, files []string, format string, tmpl *workitems.Template) (exitCode int, err error) {
	if format == "" {
		format = FormatAuto
	}
	if !slices.Contains([]string{FormatAuto, FormatGoJSON, FormatJUnit, FormatTAP}, format) {
		return 2, fmt.Errorf("verify: format %q: want auto, gojson, junit or tap", format)
	}
	if tmpl == nil {
		tmpl = &workitems.Template{Name: "cli", MaxAttempts: 3, Retry: workitems.Retry{SameFailureLimit: 2}}
	}
	f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, Template: tmpl,
		Now: time.Now(), ReportExpected: true}
	pw := &errWriter{w: w}
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return 2, fmt.Errorf("verify: %w", err)
		}
		rep, err := ParseFile(file, format, Limits{})
		if err != nil {
			f.Missing = append(f.Missing, err.Error())
			pw.printf("%s: %v\n", file, err)
			continue
		}
		f.Reports = append(f.Reports, rep)
		printReport(pw, rep)
	}
	if len(files) == 0 {
		f.Missing = append(f.Missing, "no report files given")
	}
	d := decide(f)
	reason := d.Reasons[0]
	if len(d.Reasons) > 1 && d.Rule != "" && d.Outcome == workitems.OutcomeEscalate {
		reason = d.Reasons[len(d.Reasons)-1]
	}
	pw.printf("decision: %s — %s\n", d.Outcome, oneLine(reason))
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

func oneLine(s string) string { return clip(strings.Join(strings.Fields(s), " "), 300) }

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
