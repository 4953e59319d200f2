package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"outerloop/workitems"
)

// A config version is a stable hash of the normalised config: the config as the code reads it
// after defaults are applied, encoded as JSON (struct fields in declaration order, map keys
// sorted), so comments, key order, quoting and spelled-out defaults do not change it. The
// directory the file was loaded from is not part of it (two hosts mounting the same file at
// different paths run the same config). A template version is the same hash of one template's
// effective settings: the template after defaults, the provider its loop names and the forges
// its delivery and CI name; a change elsewhere in the file leaves it as it is.
//
// Versions are 12 hex digits (48 bits of SHA-256): enough to tell configs of one deployment
// apart, short enough to read in a table.

// versionLen is the length of a printed version.
const versionLen = 12

// configCache holds what is derived from a parsed config once: the name index and the
// versions. ParseConfig sets it; a Config built in code has none and derives each time.
type configCache struct {
	index map[string]int // template name → position in Templates

	once    sync.Once
	version string
}

func newConfigCache(c *Config) *configCache {
	idx := make(map[string]int, len(c.Templates))
	for i := range c.Templates {
		idx[c.Templates[i].Name] = i
	}
	return &configCache{index: idx}
}

// lookup finds a template through the index, checking the index still matches (a caller may
// have edited Templates after parsing); sure is false when the caller must search.
func (cc *configCache) lookup(c *Config, name string) (t *Template, found, sure bool) {
	if cc == nil {
		return nil, false, false
	}
	// A name the index lacks is searched for (rare: an unknown template's error path).
	if i, ok := cc.index[name]; ok && i < len(c.Templates) && c.Templates[i].Name == name {
		return &c.Templates[i], true, true
	}
	return nil, false, false
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Every field of Config marshals; a failure is a programming error worth seeing.
		panic(fmt.Sprintf("workitems: config version: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:versionLen]
}

// Version returns the config version: a stable hash of the normalised config (see above).
func (c *Config) Version() string {
	if c == nil {
		return ""
	}
	if cc := c.cache; cc != nil {
		cc.once.Do(func() { cc.version = c.computeVersion() })
		return cc.version
	}
	return c.computeVersion()
}

func (c *Config) computeVersion() string {
	n := *c
	n.Dir = ""
	n.cache = nil
	return hashJSON(&n)
}

// templateSettings is what a template version hashes: the template and the deployment-level
// settings it uses.
type templateSettings struct {
	Template *Template
	Provider *ProviderConfig        `json:",omitempty"`
	Forges   map[string]ForgeConfig `json:",omitempty"`
}

// TemplateVersion returns the version of the named template's effective settings ("" when the
// config has no such template).
func (c *Config) TemplateVersion(name string) string {
	t, ok := c.Template(name)
	if !ok {
		return ""
	}
	return c.templateVersion(t)
}

// VersionOf returns the version of t's effective settings under c, whatever its name says:
// a template built apart from the config (an eval run's, a variant over a production
// template) hashes equal to any other with the same settings.
func (c *Config) VersionOf(t *Template) string {
	if t == nil {
		return ""
	}
	return c.templateVersion(t)
}

func (c *Config) templateVersion(t *Template) string {
	s := templateSettings{Template: t}
	if p, ok := c.Providers[t.Loop.Provider]; ok && t.Loop.Provider != "" {
		s.Provider = &p
	}
	for _, key := range []string{t.Deliver.Forge, ciForge(t)} {
		if f, ok := c.Forges[key]; ok && key != "" {
			if s.Forges == nil {
				s.Forges = map[string]ForgeConfig{}
			}
			s.Forges[key] = f
		}
	}
	return hashJSON(&s)
}

func ciForge(t *Template) string {
	if t.DoneCheck.CI == nil {
		return ""
	}
	return t.DoneCheck.CI.Forge
}

// PinFor returns the pin of a new item of template t under config c.
func (c *Config) PinFor(t *Template) *workitems.ConfigPin {
	return &workitems.ConfigPin{Config: c.Version(), Template: c.TemplateVersion(t.Name), LoopKind: t.Loop.Kind, Repo: t.Repo,
		DeliverMode: t.Deliver.Mode, DeliverRepo: t.Deliver.Repo}
}

// Incompatible lists what changed in t since the item's pin p that the item cannot go on with:
// the inner loop kind (its checkpoints and conversation belong to the old loop), the repo
// (its workspace, base commit and patch belong to the old one), and the delivery mode or
// target repo (its delivery record, branch and pull request point at the old target).
// Everything else (goal, budgets, commands, done check, prompts, models) is compatible: the
// item's next attempt simply runs with the new settings, and the item keeps the budgets and
// goal it was created with. An item without a pin (created before versions) is compatible.
func Incompatible(p *workitems.ConfigPin, t *Template) []string {
	if p == nil {
		return nil
	}
	var out []string
	if p.LoopKind != "" && p.LoopKind != t.Loop.Kind {
		out = append(out, fmt.Sprintf("loop.kind %s → %s", p.LoopKind, t.Loop.Kind))
	}
	if p.Repo != t.Repo {
		out = append(out, fmt.Sprintf("repo %q → %q", p.Repo, t.Repo))
	}
	if p.DeliverMode != "" && p.DeliverMode != t.Deliver.Mode {
		out = append(out, fmt.Sprintf("deliver.mode %s → %s", p.DeliverMode, t.Deliver.Mode))
	}
	if p.DeliverRepo != t.Deliver.Repo {
		out = append(out, fmt.Sprintf("deliver.repo %q → %q", p.DeliverRepo, t.Deliver.Repo))
	}
	return out
}
