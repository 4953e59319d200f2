package verify

import (
	"fmt"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The bump of issue 21: its step could not reach the module proxy. The escalation must say the
// sandbox did it, name the setting, and show the command's last lines, redacted.
func TestWhyExplainsAFailureForAPerson(t *testing.T) {
	t.Parallel()
	bumpTail := "go: downloading golang.org/x/text v0.21.0\n" +
		"go: golang.org/x/text@v0.21.0: Get \"https://proxy.golang.org/golang.org/x/text/@v/v0.21.0.mod\": dial tcp: lookup proxy.golang.org on 10.0.0.2:53: dial udp 10.0.0.2:53: connect: network is unreachable\n"
	failed := func(tail string) func(f *Facts) {
		return func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitFailed, Message: "command 1 (go get -u ./... && go mod tidy) exited 1", LastMessage: tail}
			f.Commands, f.Reports = nil, nil
		}
	}
	cases := []struct {
		name       string
		setup      func(f *Facts)
		sandbox    config.Sandbox
		wantCause  []string // all in the cause; nil: no cause
		wantOutput []string // all in the output
		notOutput  []string
	}{
		{"network none: the module proxy", failed(bumpTail), config.Sandbox{Network: "none"},
			[]string{"network refused", "dial tcp: lookup proxy.golang.org", "network: none", "network: registries", "allow: [host]"},
			[]string{"go: downloading golang.org/x/text", "network is unreachable"}, nil},
		{"registries: a host the proxy refused", func(f *Facts) {
			failed("npm error 403 Forbidden - GET https://registry.example.com/left-pad\n")(f)
			f.NetworkRefused = []string{"registry.example.com:443 (not_allowed)"}
		}, config.Sandbox{Network: "registries"},
			[]string{"the sandbox refused connections to registry.example.com:443 (not_allowed)", "allow: [host]"}, []string{"403 Forbidden"}, nil},
		{"host network: not the sandbox's advice", failed("curl: (6) Could not resolve host: example.invalid\n"), config.Sandbox{Network: "host"},
			[]string{"network: host, so the host itself"}, nil, nil},
		{"mode off: never blames the sandbox", failed(bumpTail), config.Sandbox{Mode: "off", Network: "host"},
			nil, []string{"network is unreachable"}, nil},
		{"a read-only path", failed("touch: cannot touch '/etc/outerloop/x': Read-only file system\n"), config.Sandbox{},
			[]string{"read-only", "only the workspace"}, []string{"cannot touch"}, nil},
		{"a limit", func(f *Facts) {
			failed("bash: fork: retry: Resource temporarily unavailable\n")(f)
			f.Exit.Message = "command 1 (./spawn.sh) exceeded the sandbox's processes limit (256)"
		}, config.Sandbox{}, []string{"resource limit", "limits: {memory"}, []string{"fork: retry"}, nil},
		{"a plain test failure: output, no cause", func(f *Facts) {
			f.Commands = []CommandResult{{Command: "go test -json ./...", ExitCode: 1, Tail: "--- FAIL: TestAdd\nFAIL calc 0.01s\n"}}
			f.Reports = nil
		}, config.Sandbox{}, nil, []string{"--- FAIL: TestAdd", "FAIL calc"}, nil},
		{"only the last lines, redacted", failed(func() string {
			var b strings.Builder
			for i := 1; i <= 30; i++ {
				fmt.Fprintf(&b, "line %d\n", i)
			}
			return b.String() + "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
		}()), config.Sandbox{}, nil, []string{"line 30", "line 24"}, []string{"line 23\n", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := baseFacts()
			f.Template.Sandbox = c.sandbox
			c.setup(f)
			d, _ := conclude(f)
			if d.Outcome == workitems.OutcomeClose {
				t.Fatalf("decision %s, want not close", d.Outcome)
			}
			if c.wantCause == nil && d.Cause != "" {
				t.Errorf("cause %q, want none", d.Cause)
			}
			for _, w := range c.wantCause {
				if !strings.Contains(d.Cause, w) {
					t.Errorf("cause %q lacks %q", d.Cause, w)
				}
			}
			if d.Cause != "" && !strings.HasPrefix(d.Summary, d.Cause) {
				t.Errorf("summary %q does not lead with the cause", d.Summary)
			}
			for _, w := range c.wantOutput {
				if !strings.Contains(d.Output, w) {
					t.Errorf("output %q lacks %q", d.Output, w)
				}
			}
			for _, w := range c.notOutput {
				if strings.Contains(d.Output, w) {
					t.Errorf("output %q has %q", d.Output, w)
				}
			}
		})
	}
}

// A close carries no why.
func TestWhyNotOnAClose(t *testing.T) {
	t.Parallel()
	d, _ := conclude(baseFacts())
	if d.Outcome != workitems.OutcomeClose || d.Cause != "" || d.Output != "" {
		t.Fatalf("decision %s cause %q output %q", d.Outcome, d.Cause, d.Output)
	}
}
