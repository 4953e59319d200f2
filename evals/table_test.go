package evals

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestWriteTable(t *testing.T) {
	r := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{Seed: 7})
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("line %d has trailing blanks: %q", i, l)
		}
	}
	// The numbers of TestReportJSONShape, as a reader sees them.
	for _, want := range []string{
		"experiment exp-1, suite calc-fixes, repeat 1",
		"[0.49, 0.94]", "[0.24, 0.76]", // Wilson 8/10, 5/10
		"0.80", "0.50", "1:0.80", "1:0.50", // close rate, pass@1, pass^1
		"1.20", "0.15", "0.90", "0.18", // cost, cost per close
		"55.0", "91.0", "55000", // p50, p90, tokens of A
		"budget_exhausted 1, completed 9", "unknown 1",
		"0.25",  // McNemar p
		"+0.03", // Δ cost per close
		"REGRESSION A → B",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The pair's row: 5 both, 3 baseline only, 0 candidate only, 2 neither.
	if !strings.Contains(collapse(out), "A B 5 3 0 2 0.25 +0.03 [") {
		t.Errorf("pair row missing:\n%s", out)
	}
	// Regressions first and marked, then the rest unmarked.
	var tasks []string
	for _, l := range lines {
		if strings.HasPrefix(l, "task-") {
			tasks = append(tasks, l)
		}
	}
	if len(tasks) != 10 {
		t.Fatalf("%d task rows, want 10:\n%s", len(tasks), out)
	}
	for i, l := range tasks {
		regression := strings.HasSuffix(l, "regression")
		if regression != (i < 3) || (i < 3 && !strings.HasPrefix(l, "task-"+string(rune('5'+i)))) {
			t.Errorf("task row %d: %q", i, l)
		}
	}
}

// collapse replaces every run of blanks by one, undoing the table's alignment.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteTableError(t *testing.T) {
	r := BuildReport("exp-1", "calc-fixes", 1, nil, tenTasks(), ReportOptions{})
	if err := r.WriteTable(failWriter{}); err == nil {
		t.Error("WriteTable to a failing writer: no error")
	}
}
