package evals

import (
	"bytes"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestTwoExperimentsOfTheSameSuiteAndVariantsRecordEqualVersions: the versions an experiment
// records do not depend on its id (run template names carry it), so two experiments of one
// suite and variants over one config record equal versions, a changed variant a different
// one for that variant alone, and the report shows them.
func TestTwoExperimentsOfTheSameSuiteAndVariantsRecordEqualVersions(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	r := &Runner{Config: func() *config.Config { return cfg }, Clock: workitems.SystemClock{}}
	suite := &Suite{Name: "s", Tasks: []Task{{ID: "a", Template: "fix-calc"}, {ID: "b", Template: "fix-calc", Input: "other"}, {ID: "c", Template: "bump"}}}
	variant := func(name, body string) Variant {
		v, err := ParseVariant(name, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	prepare := func(id string, vs ...Variant) *Experiment {
		e, err := r.Prepare(Plan{ID: id, Suite: suite, Variants: vs})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	one := prepare("x1", variant("A", ""), variant("B", "budget: {cost_usd: 0.4}\n"))
	two := prepare("x2", variant("A", ""), variant("B", "budget: {cost_usd: 0.4}\n"))
	changed := prepare("x3", variant("A", ""), variant("B", "budget: {cost_usd: 0.5}\n"))

	v1, v2, v3 := one.Versions, two.Versions, changed.Versions
	if v1.Config == "" || v1.Config != cfg.Version() || v1.Config != v2.Config {
		t.Errorf("config versions %q %q, want the config's %q", v1.Config, v2.Config, cfg.Version())
	}
	for _, tmpl := range []string{"fix-calc", "bump"} {
		if v1.Templates[tmpl] == "" || v1.Templates[tmpl] != cfg.TemplateVersion(tmpl) || v2.Templates[tmpl] != v1.Templates[tmpl] {
			t.Errorf("%s: production versions %q %q, want the config's %q", tmpl, v1.Templates[tmpl], v2.Templates[tmpl], cfg.TemplateVersion(tmpl))
		}
		for _, name := range []string{"A", "B"} {
			if got := v1.Variants[name][tmpl]; got == "" || got != v2.Variants[name][tmpl] {
				t.Errorf("%s under %s: versions %q and %q, want equal", tmpl, name, got, v2.Variants[name][tmpl])
			}
		}
		// The eval template differs from production's (delivery forced to patch), and B's
		// overlay from A's empty one.
		if v1.Variants["A"][tmpl] == v1.Templates[tmpl] && tmpl == "fix-calc" {
			t.Errorf("%s: variant A's version equals production's, though evals force delivery", tmpl)
		}
		if v1.Variants["A"][tmpl] == v1.Variants["B"][tmpl] {
			t.Errorf("%s: A and B record one version %q", tmpl, v1.Variants["A"][tmpl])
		}
		if v3.Variants["A"][tmpl] != v1.Variants["A"][tmpl] {
			t.Errorf("%s under the unchanged A: %q, want %q", tmpl, v3.Variants["A"][tmpl], v1.Variants["A"][tmpl])
		}
		if v3.Variants["B"][tmpl] == v1.Variants["B"][tmpl] {
			t.Errorf("%s under the changed B: version %q unchanged", tmpl, v3.Variants["B"][tmpl])
		}
	}

	rep := BuildReport(one.ID, suite.Name, 1, one.VariantNames(), nil, ReportOptions{Seed: 1})
	rep.Versions = &one.Versions
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config " + v1.Config, "fix-calc", v1.Templates["fix-calc"], v1.Variants["B"]["bump"]} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
