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

// TestEveryProviderKindIsOneAProviderMayName walks ProviderKinds through validation; a kind
// outside it is refused naming every accepted one. (worker/model's tests build a provider of
// each kind.)
func TestEveryProviderKindIsOneAProviderMayName(t *testing.T) {
	t.Parallel()
	cfg := func(kind string) string {
		return fmt.Sprintf("providers:\n  p: {kind: %s, file: rec.jsonl, api_key_env: K, model: m}\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: agent, provider: p}\n    done_check: {commands: [\"true\"]}\n", kind)
	}
	for _, k := range ProviderKinds() {
		if _, err := ParseConfig([]byte(cfg(string(k)))); err != nil {
			t.Errorf("provider kind %s: %v", k, err)
		}
	}
	_, err := ParseConfig([]byte(cfg("gemini")))
	if err == nil {
		t.Fatal("provider kind gemini accepted")
	}
	for _, k := range ProviderKinds() {
		if !strings.Contains(err.Error(), string(k)) {
			t.Errorf("the refusal %q does not name %s", err, k)
		}
	}
}

// TestEverySandboxModeAndNetworkIsOneATemplateMayName walks SandboxModes and SandboxNetworks
// (proc's Mode and Network are these types) through validation, refusals included.
func TestEverySandboxModeAndNetworkIsOneATemplateMayName(t *testing.T) {
	t.Parallel()
	cfg := func(mode, network string) string {
		return fmt.Sprintf("templates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    sandbox: {mode: %s, network: %s}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", mode, network)
	}
	for _, m := range SandboxModes() {
		for _, n := range SandboxNetworks() {
			_, err := ParseConfig([]byte(cfg(string(m), string(n))))
			if refused := m == SandboxOff && n != NetworkHost; (err != nil) != refused { // mode off has only the host's network
				t.Errorf("mode %s network %s: %v (refusal expected: %v)", m, n, err, refused)
			}
		}
	}
	for _, bad := range [][2]string{{"docker", "none"}, {"bwrap", "lan"}} {
		_, err := ParseConfig([]byte(cfg(bad[0], bad[1])))
		if err == nil {
			t.Fatalf("mode %s network %s accepted", bad[0], bad[1])
		}
		list := JoinKinds(SandboxModes())
		if bad[1] == "lan" {
			list = JoinKinds(SandboxNetworks())
		}
		if !strings.Contains(err.Error(), list) {
			t.Errorf("the refusal %q does not name %s", err, list)
		}
	}
}

// TestEveryCIProviderIsOneADoneCheckMayName walks AllCIProviders through validation (github
// with its forge of kind github, webhook alone); another provider is refused naming them.
func TestEveryCIProviderIsOneADoneCheckMayName(t *testing.T) {
	t.Parallel()
	cfg := func(provider string) string {
		return fmt.Sprintf("forges: {gh: {kind: github, token_env: T}}\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {ci: {provider: %s, repo: a/b, required: [test]}}\n", provider)
	}
	for _, p := range AllCIProviders() {
		if _, err := ParseConfig([]byte(cfg(string(p)))); err != nil {
			t.Errorf("provider %s: %v", p, err)
		}
	}
	_, err := ParseConfig([]byte(cfg("jenkins")))
	if err == nil || !strings.Contains(err.Error(), JoinKinds(AllCIProviders())) {
		t.Fatalf("provider jenkins: %v, want it refused naming %s", err, JoinKinds(AllCIProviders()))
	}
}
