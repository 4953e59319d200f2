package verify_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"outerloop/verify"
)

// parseChecklist is an evidence parser for a format of its own: one "PASS name" or
// "FAIL name: message" per line and a last line "END n" declaring how many tests ran. It reads
// line by line, so a report of any length costs its tests, not its bytes. A test's id is its
// name, never the report's path: the workspace, and so the path, differs between attempts, and
// the verifier spots a failure repeating by its ids.
func parseChecklist(rd io.Reader, source string) (*verify.Report, error) {
	r := verify.NewReport(source, "checklist")
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "PASS "):
			name := strings.TrimPrefix(line, "PASS ")
			r.Tests = append(r.Tests, &verify.TestCase{ID: name, Name: name,
				Runs: []verify.TestRun{{Outcome: verify.OutcomePass}}})
		case strings.HasPrefix(line, "FAIL "):
			name, msg, _ := strings.Cut(strings.TrimPrefix(line, "FAIL "), ": ")
			r.Tests = append(r.Tests, &verify.TestCase{ID: name, Name: name,
				Runs: []verify.TestRun{{Outcome: verify.OutcomeFail, Message: msg}}})
			if r.FirstError == "" {
				r.FirstError = name + ": " + msg
			}
		case strings.HasPrefix(line, "END "):
			fmt.Sscanf(line, "END %d", &r.Declared.Total)
			r.Complete = true // a report cut before END is incomplete, so never green
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong): // a malformed report is evidence, not an error
		r.Complete = false
		r.Warnings = append(r.Warnings, "a line longer than 64 KiB: the rest not read")
	case err != nil: // the reader failed: no evidence either way
		return nil, fmt.Errorf("checklist: reading %s: %w", source, err)
	}
	r.Tally()
	return r, nil
}

// Writing an evidence parser: fill a Report from NewReport with the tests and what the format
// declares, then Tally; Green and Summary then judge it like the built-in formats.
func Example_evidenceParser() {
	r, _ := parseChecklist(strings.NewReader("PASS login\nFAIL logout: session kept\nEND 2\n"), "smoke")
	fmt.Println(r.Summary())
	fmt.Println("failing:", r.Failing(), "green:", r.Green())

	cut, _ := parseChecklist(strings.NewReader("PASS login\nPASS logout\n"), "smoke")
	fmt.Println("cut before END, green:", cut.Green())

	lying, _ := parseChecklist(strings.NewReader("PASS login\nEND 5\n"), "smoke")
	ok, why := lying.CountsAgree()
	fmt.Println("declares 5, runs 1:", ok, why)
	// Output:
	// checklist smoke: 2 tests, 1 passed, 1 failed, 0 errors, 0 skipped
	// failing: [logout] green: false
	// cut before END, green: false
	// declares 5, runs 1: false tests declared 5, found 1
}
