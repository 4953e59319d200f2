package config

import (
	"fmt"
	"maps"
)

// EffectiveTemplate applies c's defaults to t and validates it with the code ParseConfig runs
// for a template of c's file (same rules, same *ConfigError), with the loop kinds of loops
// (nil: built-in). It returns the effective template; c and t are left as they are. Evals use
// it to check a template a variant changed, so that a variant is refused exactly as the same
// template written in outerloop.yaml would be.
func (c *Config) EffectiveTemplate(t Template, loops LoopRegistry) (*Template, error) {
	if loops == nil {
		loops = BuiltinLoopKinds()
	}
	// applyDefaults writes through the CI pointer and into the forges map: give it copies.
	if t.DoneCheck.CI != nil {
		ci := *t.DoneCheck.CI
		t.DoneCheck.CI = &ci
	}
	n := Config{
		Redis: c.Redis, Defaults: c.Defaults, Providers: c.Providers, Forges: maps.Clone(c.Forges),
		Retention: c.Retention, Sandbox: c.Sandbox, Notify: c.Notify, Waits: c.Waits, Dir: c.Dir,
		Templates: []Template{t},
	}
	n.applyDefaults()
	if err := n.validateTemplate(&n.Templates[0], loops); err != nil {
		return nil, err
	}
	if n.Dir != "" { // as LoadConfig does for a file's templates
		n.ResolveOperatorFiles()
	}
	return &n.Templates[0], nil
}

// TemplateVersionOf returns the version of t's effective settings under c, as TemplateVersion
// does for a template of c's own (t need not be one of them).
func (c *Config) TemplateVersionOf(t *Template) string { return c.templateVersion(t) }

// WithTemplates returns a copy of c whose templates are ts (effective templates, as
// EffectiveTemplate returns them) instead of its own: evals build their namespace's config so.
// Two templates of one name are refused.
func (c *Config) WithTemplates(ts []Template) (*Config, error) {
	n := *c
	n.Templates = ts
	n.cache = newConfigCache(&n)
	if len(n.cache.index) != len(ts) {
		seen := map[string]bool{}
		for _, t := range ts {
			if seen[t.Name] {
				return nil, fmt.Errorf("workitems: template %q is given twice", t.Name)
			}
			seen[t.Name] = true
		}
	}
	return &n, nil
}
