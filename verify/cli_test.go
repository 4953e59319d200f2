package verify

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"outerloop/workitems"
)

func TestRunCLI(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		files    []string
		format   workitems.ReportFormat
		code     int
		decision string
		contains []string
	}{
		{"a green report closes with exit 0", []string{"testdata/gojson/pass.json"}, "", 0, "decision: close — all green", []string{"4 passed"}},
		{"a failing report would retry and exits 1", []string{"testdata/gojson/fail.json"}, "auto", 1, "decision: retry — 3 failing tests",
			[]string{"FAIL fixtures/fail.TestWrongSum: fail_test.go:10: sum = 3, want 4"}},
		{"a JUnit file with wrong totals and a real failure retries with the failure", []string{"testdata/junit/surefire-wrong-totals.xml"}, "", 1, "decision: retry — 1 failing tests (com.acme.LedgerTest.rounds)", []string{"disagrees"}},
		{"a missing file never closes", []string{"testdata/nope.xml"}, "", 1, "decision: retry — no test report", nil},
		{"a green report plus a missing one never closes", []string{"testdata/gojson/pass.json", "testdata/nope.xml"}, "", 1, "decision: retry — no test report", nil},
		{"a JUnit file read as TAP is not evidence", []string{"testdata/junit/bom.xml"}, "tap", 1, "decision: retry", nil},
		{"a flaky rerun closes with a note", []string{"testdata/gojson/rerun.json"}, "", 0, "decision: close — all green (2 tests); flaky", []string{"FLAKY fixtures/flaky.TestSometimes"}},
		{"zero tests never close", []string{"testdata/gojson/notests.json"}, "", 1, "decision: retry — zero tests", nil},
		{"no files never close", nil, "", 1, "decision: retry", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code, err := RunCLI(context.Background(), &out, c.files, CLIOptions{Format: c.format})
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if code != c.code || !strings.HasPrefix(last, c.decision) {
				t.Fatalf("code %d, last line %q; want %d, %q\n%s", code, last, c.code, c.decision, out.String())
			}
			if n := strings.Count(out.String(), "decision: "); n != 1 {
				t.Fatalf("%d decision lines", n)
			}
			for _, s := range c.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
	t.Run("a green TAP stream closes only with the test command's exit status 0", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			exit *int
			code int
			want string
		}{{nil, 1, "--exit-code"}, {new(0), 0, "decision: close — all green"}, {new(255), 1, "decision: retry"}} {
			var out bytes.Buffer
			code, err := RunCLI(context.Background(), &out, []string{"testdata/tap/perl-dies-stdout.tap"}, CLIOptions{ExitCode: c.exit})
			if err != nil || code != c.code || !strings.Contains(out.String(), c.want) {
				t.Errorf("exit %v: code %d err %v, output lacks %q:\n%s", c.exit, code, err, c.want, out.String())
			}
		}
	})
	t.Run("an unknown format is an error", func(t *testing.T) {
		t.Parallel()
		code, err := RunCLI(context.Background(), &bytes.Buffer{}, []string{"x"}, CLIOptions{Format: "xml"})
		if err == nil || code != 2 {
			t.Fatalf("code %d err %v", code, err)
		}
	})
	t.Run("a failing writer is an error", func(t *testing.T) {
		t.Parallel()
		code, err := RunCLI(context.Background(), failWriter{}, []string{"testdata/gojson/pass.json"}, CLIOptions{})
		if err == nil || code != 2 {
			t.Fatalf("code %d err %v", code, err)
		}
	})
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
