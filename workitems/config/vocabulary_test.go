package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
)

// TestEveryReportFormatTheVerifierReadsIsOneATemplateMayName walks AllReportFormats through
// the config's validation: each is accepted, and a value outside it is refused naming the
// field and every accepted value.
func TestEveryReportFormatTheVerifierReadsIsOneATemplateMayName(t *testing.T) {
	t.Parallel()
	cfg := func(format string) string {
		return fmt.Sprintf("templates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"], format: %s}\n", format)
	}
	for _, f := range workitems.AllReportFormats() {
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
	for _, f := range workitems.AllReportFormats() {
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
	for _, k := range workitems.ProviderKinds() {
		if _, err := ParseConfig([]byte(cfg(string(k)))); err != nil {
			t.Errorf("provider kind %s: %v", k, err)
		}
	}
	_, err := ParseConfig([]byte(cfg("gemini")))
	if err == nil {
		t.Fatal("provider kind gemini accepted")
	}
	for _, k := range workitems.ProviderKinds() {
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
	for _, m := range workitems.SandboxModes() {
		for _, n := range workitems.SandboxNetworks() {
			_, err := ParseConfig([]byte(cfg(string(m), string(n))))
			if refused := m == workitems.SandboxOff && n != workitems.NetworkHost; (err != nil) != refused { // mode off has only the host's network
				t.Errorf("mode %s network %s: %v (refusal expected: %v)", m, n, err, refused)
			}
		}
	}
	for _, bad := range [][2]string{{"docker", "none"}, {"bwrap", "lan"}} {
		_, err := ParseConfig([]byte(cfg(bad[0], bad[1])))
		if err == nil {
			t.Fatalf("mode %s network %s accepted", bad[0], bad[1])
		}
		list := workitems.JoinKinds(workitems.SandboxModes())
		if bad[1] == "lan" {
			list = workitems.JoinKinds(workitems.SandboxNetworks())
		}
		if !strings.Contains(err.Error(), list) {
			t.Errorf("the refusal %q does not name %s", err, list)
		}
	}
}

// TestEveryBuildCacheScopeIsOneATemplateMayName walks BuildCacheScopes through validation; an
// unknown scope is refused naming them, and an unset one is the default (repository) by proc.
func TestEveryBuildCacheScopeIsOneATemplateMayName(t *testing.T) {
	t.Parallel()
	cfg := func(scope string) string {
		return fmt.Sprintf("sandbox: {build_cache: %s}\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", scope)
	}
	for _, sc := range workitems.BuildCacheScopes() {
		c, err := ParseConfig([]byte(cfg(string(sc))))
		if err != nil {
			t.Errorf("build_cache %s: %v", sc, err)
			continue
		}
		if got := c.Templates[0].Sandbox.BuildCache; got != sc {
			t.Errorf("build_cache %s: the template's merged sandbox has %q", sc, got)
		}
	}
	_, err := ParseConfig([]byte(cfg("tmp")))
	if err == nil || !strings.Contains(err.Error(), workitems.JoinKinds(workitems.BuildCacheScopes())) {
		t.Fatalf("build_cache tmp: %v, want it refused naming %s", err, workitems.JoinKinds(workitems.BuildCacheScopes()))
	}
}

// TestEveryCIProviderIsOneADoneCheckMayName walks AllCIProviders through validation (github
// with its forge of kind github, webhook alone); another provider is refused naming them.
func TestEveryCIProviderIsOneADoneCheckMayName(t *testing.T) {
	t.Parallel()
	cfg := func(provider string) string {
		return fmt.Sprintf("forges: {gh: {kind: github, token_env: T}}\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {ci: {provider: %s, repo: a/b, required: [test]}}\n", provider)
	}
	for _, p := range workitems.AllCIProviders() {
		if _, err := ParseConfig([]byte(cfg(string(p)))); err != nil {
			t.Errorf("provider %s: %v", p, err)
		}
	}
	_, err := ParseConfig([]byte(cfg("jenkins")))
	if err == nil || !strings.Contains(err.Error(), workitems.JoinKinds(workitems.AllCIProviders())) {
		t.Fatalf("provider jenkins: %v, want it refused naming %s", err, workitems.JoinKinds(workitems.AllCIProviders()))
	}
}

// sinkOfKind is a sink of each kind that validation accepts (each kind wants its own fields).
var sinkOfKind = map[workitems.NotifySinkKind]string{
	workitems.SinkWebhook: `{kind: webhook, url: "https://hooks.example.com/x", secret_env: HOOK_SECRET}`,
	workitems.SinkSlack:   `{kind: slack, url_env: SLACK_URL}`,
}

// TestEveryNotifySinkKindAndEventIsOneTheConfigMayName walks AllNotifySinkKinds and
// AllNotifyEvents through validation (notify.NewDispatcher builds a sink of each kind); a kind
// or an event outside them is refused naming every accepted one.
func TestEveryNotifySinkKindAndEventIsOneTheConfigMayName(t *testing.T) {
	t.Parallel()
	cfg := func(sink, event string) string {
		return fmt.Sprintf("notify:\n  events: [%s]\n  sinks:\n    s: %s\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", event, sink)
	}
	for _, k := range workitems.AllNotifySinkKinds() {
		sink, ok := sinkOfKind[k]
		if !ok {
			t.Errorf("sink kind %s has no valid sink in this test: add one", k)
			continue
		}
		for _, ev := range workitems.AllNotifyEvents() {
			c, err := ParseConfig([]byte(cfg(sink, string(ev))))
			if err != nil {
				t.Errorf("sink kind %s, event %s: %v", k, ev, err)
				continue
			}
			if got := c.Notify.Sinks["s"].Kind; got != k || !slices.Equal(c.Notify.Events, []workitems.NotifyEvent{ev}) {
				t.Errorf("sink kind %s, event %s parsed as %s, %v", k, ev, got, c.Notify.Events)
			}
		}
	}
	_, err := ParseConfig([]byte(cfg(`{kind: teams, url: "https://x.example.com/"}`, string(workitems.NotifyEscalation))))
	if err == nil || !strings.Contains(err.Error(), "notify.sinks.s.kind") {
		t.Errorf("sink kind teams: %v, want notify.sinks.s.kind refused", err)
	}
	for _, k := range workitems.AllNotifySinkKinds() {
		if err == nil || !strings.Contains(err.Error(), string(k)) {
			t.Errorf("the refusal %v does not name %s", err, k)
		}
	}
	_, err = ParseConfig([]byte(cfg(sinkOfKind[workitems.SinkSlack], "deployed")))
	if err == nil || !strings.Contains(err.Error(), "notify.events") || !strings.Contains(err.Error(), workitems.JoinKinds(workitems.AllNotifyEvents())) {
		t.Errorf("event deployed: %v, want notify.events refused naming %s", err, workitems.JoinKinds(workitems.AllNotifyEvents()))
	}
}

// TestEveryMergeMethodAndReviewReactionIsOneADeliveryMayName walks AllMergeMethods (forge's
// merge calls take each) and AllOnChangesRequested (verify's review rows decide on each)
// through validation, refusals included.
func TestEveryMergeMethodAndReviewReactionIsOneADeliveryMayName(t *testing.T) {
	t.Parallel()
	edit := func(method, onChanges string) string {
		return fmt.Sprintf("      forge: gh\n      merge_method: %s\n      review: {on_changes_requested: %s}\n", method, onChanges)
	}
	for _, m := range workitems.AllMergeMethods() {
		for _, r := range workitems.AllOnChangesRequested() {
			c, err := parseEdited(t, "      forge: gh\n", edit(string(m), string(r)))
			if err != nil {
				t.Errorf("merge method %s, on_changes_requested %s: %v", m, r, err)
				continue
			}
			tp, _ := c.Template("deps-bump")
			if d := tp.Deliver; d.MergeMethod != m || d.Review == nil || d.Review.OnChangesRequested != r {
				t.Errorf("merge method %s, on_changes_requested %s parsed as %+v", m, r, d)
			}
		}
	}
	for _, bad := range []struct{ method, onChanges, field, list string }{
		{"octopus", string(workitems.ChangesRetry), "deliver.merge_method", workitems.JoinKinds(workitems.AllMergeMethods())},
		{string(workitems.MergeSquash), "ignore", "deliver.review.on_changes_requested", workitems.JoinKinds(workitems.AllOnChangesRequested())},
	} {
		_, err := parseEdited(t, "      forge: gh\n", edit(bad.method, bad.onChanges))
		if err == nil || !strings.Contains(err.Error(), bad.field) || !strings.Contains(err.Error(), bad.list) {
			t.Errorf("%s %s: %v, want %s refused naming %s", bad.method, bad.onChanges, err, bad.field, bad.list)
		}
	}
}
