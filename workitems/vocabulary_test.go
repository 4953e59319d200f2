package workitems

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
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

// TestEveryBuildCacheScopeIsOneATemplateMayName walks BuildCacheScopes through validation; an
// unknown scope is refused naming them, and an unset one is the default (repository) by proc.
func TestEveryBuildCacheScopeIsOneATemplateMayName(t *testing.T) {
	t.Parallel()
	cfg := func(scope string) string {
		return fmt.Sprintf("sandbox: {build_cache: %s}\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", scope)
	}
	for _, sc := range BuildCacheScopes() {
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
	if err == nil || !strings.Contains(err.Error(), JoinKinds(BuildCacheScopes())) {
		t.Fatalf("build_cache tmp: %v, want it refused naming %s", err, JoinKinds(BuildCacheScopes()))
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

// ruleNameConsts reads rules.go's constants of type RuleName: name → value.
func ruleNameConsts(t *testing.T) map[string]RuleName {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "rules.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]RuleName{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "RuleName" {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = RuleName(v)
			}
		}
	}
	return out
}

// TestEveryRuleNameConstantIsListed: AllRuleNames lists exactly the RuleName constants, so a
// constant added without listing it fails.
func TestEveryRuleNameConstantIsListed(t *testing.T) {
	t.Parallel()
	consts := ruleNameConsts(t)
	if len(consts) == 0 {
		t.Fatal("no RuleName constants found in rules.go")
	}
	for name, v := range consts {
		if !slices.Contains(AllRuleNames(), v) {
			t.Errorf("%s (%s) is not in AllRuleNames", name, v)
		}
	}
	if len(AllRuleNames()) != len(consts) {
		t.Errorf("AllRuleNames has %d names, rules.go declares %d constants", len(AllRuleNames()), len(consts))
	}
}

// TestEveryRuleNameIsDecidedWithSomewhere: every rule constant is used by production code
// outside rules.go (a row of verify's table, a guard, the store, the metrics), so a name kept
// in the list after nothing decides with it any more fails. verify's tests check the names
// against the table itself.
func TestEveryRuleNameIsDecidedWithSomewhere(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.ToSlash(rel) == "workitems/rules.go" {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		inWorkitems := f.Name.Name == "workitems"
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "workitems" {
					used[n.Sel.Name] = true
				}
			case *ast.Ident:
				if inWorkitems {
					used[n.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range ruleNameConsts(t) {
		if !used[name] {
			t.Errorf("rule %s is listed but no production code decides with it", name)
		}
	}
}

// TestARuleNameIsStoredAsAPlainString keeps the stored JSON: a decision's rule and actor are
// plain strings, and a composite name an earlier version's store recorded reads back with its base.
func TestARuleNameIsStoredAsAPlainString(t *testing.T) {
	t.Parallel()
	d := Decision{Outcome: OutcomeEscalate, Rule: "max_attempts (after tests_failed)", Actor: ActorVerifierName}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rule":"max_attempts (after tests_failed)"`) || !strings.Contains(string(b), `"actor":"verifier"`) {
		t.Errorf("stored as %s", b)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil || back.Rule.Base() != RuleMaxAttempts || back.Rule != d.Rule {
		t.Errorf("read back rule %q (base %q), err %v; want %q (base %s)", back.Rule, back.Rule.Base(), err, d.Rule, RuleMaxAttempts)
	}
	if RuleAllGreen.Base() != RuleAllGreen {
		t.Errorf("base of %s is %s", RuleAllGreen, RuleAllGreen.Base())
	}
}

// TestADecisionsKindFollowsItsActor: the verifier's and the worker's decisions are the
// system's; any other actor is a person.
func TestADecisionsKindFollowsItsActor(t *testing.T) {
	t.Parallel()
	for actor, want := range map[string]ActorKind{ActorVerifierName: ActorVerifier, ActorWorkerName: ActorVerifier, "alice": ActorPerson} {
		if got := (Decision{Actor: actor}).Kind(); got != want {
			t.Errorf("actor %q: kind %s, want %s", actor, got, want)
		}
	}
}

// sinkOfKind is a sink of each kind that validation accepts (each kind wants its own fields).
var sinkOfKind = map[NotifySinkKind]string{
	SinkWebhook: `{kind: webhook, url: "https://hooks.example.com/x", secret_env: HOOK_SECRET}`,
	SinkSlack:   `{kind: slack, url_env: SLACK_URL}`,
}

// TestEveryNotifySinkKindAndEventIsOneTheConfigMayName walks AllNotifySinkKinds and
// AllNotifyEvents through validation (notify.NewDispatcher builds a sink of each kind); a kind
// or an event outside them is refused naming every accepted one.
func TestEveryNotifySinkKindAndEventIsOneTheConfigMayName(t *testing.T) {
	t.Parallel()
	cfg := func(sink, event string) string {
		return fmt.Sprintf("notify:\n  events: [%s]\n  sinks:\n    s: %s\ntemplates:\n  - name: t\n    repo: /tmp/r\n    goal: g\n    budget: {wall_time: 1m}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", event, sink)
	}
	for _, k := range AllNotifySinkKinds() {
		sink, ok := sinkOfKind[k]
		if !ok {
			t.Errorf("sink kind %s has no valid sink in this test: add one", k)
			continue
		}
		for _, ev := range AllNotifyEvents() {
			c, err := ParseConfig([]byte(cfg(sink, string(ev))))
			if err != nil {
				t.Errorf("sink kind %s, event %s: %v", k, ev, err)
				continue
			}
			if got := c.Notify.Sinks["s"].Kind; got != k || !slices.Equal(c.Notify.Events, []NotifyEvent{ev}) {
				t.Errorf("sink kind %s, event %s parsed as %s, %v", k, ev, got, c.Notify.Events)
			}
		}
	}
	_, err := ParseConfig([]byte(cfg(`{kind: teams, url: "https://x.example.com/"}`, string(NotifyEscalation))))
	if err == nil || !strings.Contains(err.Error(), "notify.sinks.s.kind") {
		t.Errorf("sink kind teams: %v, want notify.sinks.s.kind refused", err)
	}
	for _, k := range AllNotifySinkKinds() {
		if err == nil || !strings.Contains(err.Error(), string(k)) {
			t.Errorf("the refusal %v does not name %s", err, k)
		}
	}
	_, err = ParseConfig([]byte(cfg(sinkOfKind[SinkSlack], "deployed")))
	if err == nil || !strings.Contains(err.Error(), "notify.events") || !strings.Contains(err.Error(), JoinKinds(AllNotifyEvents())) {
		t.Errorf("event deployed: %v, want notify.events refused naming %s", err, JoinKinds(AllNotifyEvents()))
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
	for _, m := range AllMergeMethods() {
		for _, r := range AllOnChangesRequested() {
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
		{"octopus", string(ChangesRetry), "deliver.merge_method", JoinKinds(AllMergeMethods())},
		{string(MergeSquash), "ignore", "deliver.review.on_changes_requested", JoinKinds(AllOnChangesRequested())},
	} {
		_, err := parseEdited(t, "      forge: gh\n", edit(bad.method, bad.onChanges))
		if err == nil || !strings.Contains(err.Error(), bad.field) || !strings.Contains(err.Error(), bad.list) {
			t.Errorf("%s %s: %v, want %s refused naming %s", bad.method, bad.onChanges, err, bad.field, bad.list)
		}
	}
}

// TestFinalCheckStates: a check is final (a result, not something to wait for) unless it is
// pending, stale, unknown or unset.
func TestFinalCheckStates(t *testing.T) {
	t.Parallel()
	var final []CheckState
	for _, s := range AllCheckStates() {
		if s.Final() {
			final = append(final, s)
		}
	}
	want := []CheckState{CheckSuccess, CheckFailure, CheckInfraError, CheckCancelled, CheckNeutral, CheckActionRequired}
	if !slices.Equal(final, want) || CheckState("").Final() {
		t.Fatalf("final states %v, want %v", final, want)
	}
	if fmt.Sprint(AllPRStates()) != "[open closed merged]" {
		t.Fatal(AllPRStates())
	}
}
