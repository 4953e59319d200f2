package verify

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"outerloop/lib/shorten"
)

// maxJestJSON bounds a jest/vitest JSON report: it is one JSON document, decoded whole, so the
// bound is on its size; a larger report is cut and so incomplete (it can never close).
const maxJestJSON = 64 << 20

type jestReport struct {
	NumTotalTests             *int  `json:"numTotalTests"`
	NumFailedTests            *int  `json:"numFailedTests"`
	NumPassedTests            *int  `json:"numPassedTests"`
	NumPendingTests           *int  `json:"numPendingTests"`
	NumTodoTests              *int  `json:"numTodoTests"`
	NumRuntimeErrorTestSuites int   `json:"numRuntimeErrorTestSuites"`
	WasInterrupted            *bool `json:"wasInterrupted"`
	TestResults               []struct {
		Name             string `json:"name"`
		Status           string `json:"status"`
		Message          string `json:"message"`
		AssertionResults []struct {
			FullName        string   `json:"fullName"`
			Title           string   `json:"title"`
			Status          string   `json:"status"`
			Duration        *float64 `json:"duration"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// detectJestJSON: the head opens as one JSON object naming jest's totals or results.
func detectJestJSON(head []byte) Detection {
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '{' &&
		(bytes.Contains(head, []byte(`"numTotalTests"`)) || bytes.Contains(head, []byte(`"assertionResults"`))) {
		return DetectOpens
	}
	return DetectNone
}

// ParseJestJSON reads a jest (`--json`) or vitest (`--reporter=json`) report. The document is
// decoded whole, bounded at 64 MiB (a larger one is incomplete). numTotalTests counts every
// assertion result, todos and pending included; a test file that failed to run (a syntax
// error, a failing import) has a message and no results and becomes an error case.
func ParseJestJSON(r io.Reader, source string, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	rep := &Report{Source: source, Format: FormatJestJSON, Declared: unknownCounts(), Complete: true, Flavor: "vitest-json"}
	src := &readErr{r: io.LimitReader(r, maxJestJSON+1)}
	data, err := io.ReadAll(src)
	if err != nil {
		return nil, fmt.Errorf("verify: reading %s: %w", source, err)
	}
	data = trimBOM(data)
	if len(data) > maxJestJSON {
		rep.Complete = false
		rep.warn(lim.MaxWarn, "report larger than %d bytes, not read", maxJestJSON)
		rep.tally(Counts{})
		return rep, nil
	}
	var jr jestReport
	if err := json.Unmarshal(data, &jr); err != nil {
		rep.Complete = false
		rep.warn(lim.MaxWarn, "JSON error: %v", err)
		rep.tally(Counts{})
		return rep, nil
	}
	if jr.WasInterrupted != nil {
		rep.Flavor = "jest-json"
		if *jr.WasInterrupted {
			rep.Complete = false
			rep.warn(lim.MaxWarn, "the run was interrupted")
		}
	}
	rep.convention(ConvJSONTotals)
	opt := func(p *int) int {
		if p == nil {
			return -1
		}
		return *p
	}
	rep.Declared.Total, rep.Declared.Failed, rep.Declared.Passed = opt(jr.NumTotalTests), opt(jr.NumFailedTests), opt(jr.NumPassedTests)
	if jr.NumPendingTests != nil || jr.NumTodoTests != nil {
		rep.Declared.Skipped = max(opt(jr.NumPendingTests), 0) + max(opt(jr.NumTodoTests), 0)
	}
	var listed, dropped Counts
	for _, file := range jr.TestResults {
		if len(file.AssertionResults) == 0 && (file.Message != "" || file.Status == "failed") {
			// The file did not run: not a test in the totals, a failure all the same.
			tc := &TestCase{ID: file.Name + ".(suite)", Suite: file.Name, Name: "(suite)",
				Runs: []TestRun{{Outcome: OutcomeError, Message: cmp.Or(firstLine(stripANSI(file.Message)), "test file failed to run"),
					Output: shorten.Clip(stripANSI(file.Message), lim.OutputTail)}}}
			rep.Tests = append(rep.Tests, tc)
			listed.Errored++
			continue
		}
		for _, a := range file.AssertionResults {
			run := TestRun{}
			if a.Duration != nil {
				run.Elapsed = time.Duration(*a.Duration * float64(time.Millisecond))
			}
			switch a.Status {
			case "passed":
				run.Outcome = OutcomePass
			case "failed":
				run.Outcome = OutcomeFail
				msg := stripANSI(strings.Join(a.FailureMessages, "\n"))
				run.Message, run.Output = firstLine(msg), shorten.Clip(msg, lim.OutputTail)
				listed.Failed++
			case "pending", "skipped", "todo", "disabled":
				run.Outcome, run.Message = OutcomeSkip, a.Status
				listed.Skipped++
				rep.convention(ConvJSONTodo)
			default:
				run.Outcome, run.Message = OutcomeIncomplete, "status "+a.Status
			}
			listed.Total++
			name := cmp.Or(a.FullName, a.Title)
			// Beyond MaxTests only failing tests are kept (up to MaxTests more), so their ids
			// reach the retry.
			if n := len(rep.Tests); n >= lim.MaxTests && (!run.Outcome.Bad() || n >= 2*lim.MaxTests) {
				rep.Dropped++
				dropped.add(run.Outcome)
				continue
			}
			rep.Tests = append(rep.Tests, &TestCase{ID: file.Name + "." + name, Suite: file.Name, Name: name, Runs: []TestRun{run}})
		}
	}
	if jr.NumTotalTests == nil && len(jr.TestResults) == 0 {
		rep.Complete = false
		rep.warn(lim.MaxWarn, "not a jest or vitest JSON report")
	}
	rep.tally(dropped)
	rep.Listed = listed
	rep.FirstError = firstReportError(rep)
	return rep, nil
}

// stripANSI removes terminal colour sequences (jest writes them into failure messages).
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}
