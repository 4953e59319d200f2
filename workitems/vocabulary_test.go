package workitems

import (
	"fmt"
	"strings"
	"testing"
)

// TestEveryReportFormatTheVerifierReadsIsOneATemplateMayName walks AllReportFormats through
// the config's validation: each is accepted, and a value outside it is refused naming the
// field and every accepted value.
func TestEveryReportFormatTheVerifierReadsIsOneATemplateMayName(t *testing.T) {
	t.Parallel()
	cfg := func(format string) string {
		return fmt.Sprintf("templates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"], format: %s}\n", format)
	}
	for _, f := range AllReportFormats() {
		c, err := ParseConfig([]byte(cfg(string(f))))
		if err != nil {
			t.Errorf("format %s: %v", f, err)
			continue
		}
		if got := c.Templates[0].DoneCheck.Format; got != f {
			t.Errorf("format %s parsed as %s", f, got)
		}
	}
	_, err := ParseConfig([]byte(cfg("xunit")))
	if err == nil || !strings.Contains(err.Error(), "done_check.format") {
		t.Fatalf("format xunit: %v, want done_check.format refused", err)
	}
	for _, f := range AllReportFormats() {
		if !strings.Contains(err.Error(), string(f)) {
			t.Errorf("the refusal %q does not name %s", err, f)
		}
	}
}
