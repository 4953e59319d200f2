package verify_test

import (
	"bufio"
	"fmt"
	"strings"

	"outerloop/verify"
)

// parseChecklist is an evidence parser for a format of its own: one "PASS name" or
// "FAIL name: message" per line and a last line "END n" declaring how many tests ran.
func parseChecklist(text, source string) *verify.Report {
	r := verify.NewReport(source, "checklist")
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "PASS "):
			name := strings.TrimPrefix(line, "PASS ")
			r.Tests = append(r.Tests, &verify.TestCase{ID: source + "." + name, Suite: source, Name: name,
				Runs: []verify.TestRun{{Outcome: verify.OutcomePass}}})
		case strings.HasPrefix(line, "FAIL "):
			name, msg, _ := strings.Cut(strings.TrimPrefix(line, "FAIL "), ": ")
			r.Tests = append(r.Tests, &verify.TestCase{ID: source + "." + name, Suite: source, Name: name,
				Runs: []verify.TestRun{{Outcome: verify.OutcomeFail, Message: msg}}})
			if r.FirstError == "" {
				r.FirstError = name + ": " + msg
			}
		case strings.HasPrefix(line, "END "):
			fmt.Sscanf(line, "END %d", &r.Declared.Total)
			r.Complete = true // a report cut before END is incomplete, so never green
		}
	}
	r.Tally()
	return r
}

// Writing an evidence parser: fill a Report from NewReport with the tests and what the format
// declares, then Tally; Green and Summary then judge it like the built-in formats.
func Example_evidenceParser() {
	r := parseChecklist("PASS login\nFAIL logout: session kept\nEND 2\n", "smoke")
	fmt.Println(r.Summary())
	fmt.Println("failing:", r.Failing(), "green:", r.Green())

	cut := parseChecklist("PASS login\nPASS logout\n", "smoke")
	fmt.Println("cut before END, green:", cut.Green())

	lying := parseChecklist("PASS login\nEND 5\n", "smoke")
	ok, why := lying.CountsAgree()
	fmt.Println("declares 5, runs 1:", ok, why)
	// Output:
	// checklist smoke: 2 tests, 1 passed, 1 failed, 0 errors, 0 skipped
	// failing: [smoke.logout] green: false
	// cut before END, green: false
	// declares 5, runs 1: false tests declared 5, found 1
}
