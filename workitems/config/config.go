package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"outerloop/workitems"
)

// Config is one deployment's outerloop.yaml.
type Config struct {
	Redis     string                    `yaml:"redis"`
	Defaults  Defaults                  `yaml:"defaults"`
	Providers map[string]ProviderConfig `yaml:"providers"`
	// Forges are where results are delivered and CI is read, by key (deliver.forge, ci.forge).
	Forges    map[string]ForgeConfig `yaml:"forges"`
	Templates []Template             `yaml:"templates"`
	Retention Retention              `yaml:"retention"`
	// Sandbox is the deployment's sandbox; a template's own sandbox: overrides it per field.
	Sandbox Sandbox `yaml:"sandbox"`
	// Notify says who is told about escalations, failures and daily caps (config_notify.go).
	Notify Notify `yaml:"notify"`
	// Waits tunes how waiting items are polled and when they reach the inbox (wait.go).
	Waits Waits `yaml:"waits"`
	// Alertmanager names the receivers Alertmanager posts to (POST /hooks/alertmanager/{name})
	// and how each authenticates (alertmanager.go).
	Alertmanager Alertmanager `yaml:"alertmanager" json:",omitzero"`
	// Dir is the directory relative repo paths are resolved against (the config file's).
	Dir string `yaml:"-"`

	cache *configCache // the name index and versions, set by ParseConfig (config_version.go)
}

// Defaults apply to every template that does not override them.
type Defaults struct {
	MaxAttempts int              `yaml:"max_attempts"`
	Budget      workitems.Budget `yaml:"budget"`      // per attempt
	ItemBudget  workitems.Budget `yaml:"item_budget"` // per item, across all attempts
}

// Prices is a model's price table in USD per million tokens.
type Prices struct {
	InputPerMTok       float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok" json:"cached_input_per_mtok"`
	OutputPerMTok      float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
}

// ProviderConfig is a model endpoint. The API key is read from the environment variable
// APIKeyEnv at use; it never appears in config, logs or events.
type ProviderConfig struct {
	Kind      workitems.ProviderKind `yaml:"kind"` // ProviderKinds
	BaseURL   string                 `yaml:"base_url"`
	APIKeyEnv string                 `yaml:"api_key_env"`
	Model     string                 `yaml:"model"`
	Prices    Prices                 `yaml:"prices"`
	File      string                 `yaml:"file"` // replay: the recording to play
}

// Loop configures a template's inner loop. Which fields apply depends on Kind.
type Loop struct {
	Kind workitems.LoopKind `yaml:"kind"`

	// Model and PromptVariant are where an item's first attempt starts
	// (Template.FirstStrategy): the model overrides the provider's (agent, and exec agents
	// whose command line takes a model), the prompt variant is the approach the prompt asks
	// for (OUTERLOOP_PROMPT_VARIANT for a script). Retries may change both.
	// omitempty: a config that sets neither keeps the version it had before they existed.
	Model         string `yaml:"model" json:"Model,omitempty"`
	PromptVariant string `yaml:"prompt_variant" json:"PromptVariant,omitempty"`

	// agent
	Provider           string   `yaml:"provider"`
	ContextLimitTokens int      `yaml:"context_limit_tokens"`
	StopHooks          []string `yaml:"stop_hooks"`
	NoProgressLimit    int      `yaml:"no_progress_limit"`
	Instructions       string   `yaml:"instructions"`

	// exec
	Agent   string   `yaml:"agent"`
	Command string   `yaml:"command"` // binary to run (defaults to the agent's usual name)
	Args    []string `yaml:"args"`
	Env     []string `yaml:"env"` // names of environment variables passed through

	// script
	Commands       []string           `yaml:"commands"`
	CommandTimeout workitems.Duration `yaml:"command_timeout"`
}

// CICheck says which CI checks must be green, and how long to wait for them.
type CICheck struct {
	// Forge is the key of the forge whose checks are read. Provider github (written before
	// forges: existed) resolves to the forge of kind github; provider webhook reads results
	// posted to /api/evidence instead.
	Forge    string               `yaml:"forge" json:"forge,omitempty"`
	Provider workitems.CIProvider `yaml:"provider" json:"provider,omitempty"` // AllCIProviders
	Repo     string               `yaml:"repo" json:"repo"`                   // owner/name (default deliver.repo)
	Required []string             `yaml:"required" json:"required"`
	Wait     workitems.Duration   `yaml:"wait" json:"wait"`
}

// DiffCheck limits what an attempt may change.
type DiffCheck struct {
	AllowedPaths []string `yaml:"allowed_paths" json:"allowed_paths"`
	MaxFiles     int      `yaml:"max_files" json:"max_files"`
	MaxLines     int      `yaml:"max_lines" json:"max_lines"`
}

// DoneCheck is the evidence that closes an item.
type DoneCheck struct {
	Commands []string               `yaml:"commands" json:"commands"`
	Format   workitems.ReportFormat `yaml:"format" json:"format"` // AllReportFormats
	Reports  []string               `yaml:"reports" json:"reports"`
	CI       *CICheck               `yaml:"ci" json:"ci,omitempty"`
	Diff     *DiffCheck             `yaml:"diff" json:"diff,omitempty"`
	Timeout  workitems.Duration     `yaml:"timeout" json:"timeout"`
}

// Retry is a template's retry policy.
type Retry struct {
	SameFailureLimit int `yaml:"same_failure_limit"`
	InfraRetries     int `yaml:"infra_retries"`
}

// Template is a kind of work, from outerloop.yaml.
type Template struct {
	Name            string             `yaml:"name"`
	Schedule        string             `yaml:"schedule"`
	CatchUp         string             `yaml:"catch_up"` // none | last
	CatchUpWindow   workitems.Duration `yaml:"catch_up_window"`
	MaxOpen         int                `yaml:"max_open"`
	DailyCostCapUSD float64            `yaml:"daily_cost_cap_usd"`
	Repo            string             `yaml:"repo"`
	// Repos and ReposFrom make a fleet template: one item per repository at every tick
	// (fleet.go); Fleet bounds them.
	Repos       []string         `yaml:"repos" json:",omitempty"`
	ReposFrom   *ReposFrom       `yaml:"repos_from" json:",omitempty"`
	Fleet       *Fleet           `yaml:"fleet" json:",omitempty"`
	Goal        string           `yaml:"goal"`
	Loop        Loop             `yaml:"loop"`
	DoneCheck   DoneCheck        `yaml:"done_check"`
	Deliver     Deliver          `yaml:"deliver"`
	Budget      workitems.Budget `yaml:"budget"`
	ItemBudget  workitems.Budget `yaml:"item_budget"`
	MaxAttempts int              `yaml:"max_attempts"`
	Retry       Retry            `yaml:"retry"`
	Escalate    string           `yaml:"escalate"` // who is told (free text: team, channel)
	// Sandbox confines the template's commands (merged with the deployment's at load).
	Sandbox Sandbox `yaml:"sandbox"`
	// OperatorFiles are the files outside the workspace the template's commands name, shown
	// read-only in its sandbox at their own paths (operator_files.go; found by LoadConfig,
	// not configured).
	OperatorFiles []string `yaml:"-" json:"-"`
	// Notify overrides which notifications the template sends (config_notify.go).
	Notify TemplateNotify `yaml:"notify"`
	// Triggers are forge events that make items of the template (triggers.go). Left out of
	// the JSON when empty, so a template without triggers keeps its version.
	Triggers []Trigger `yaml:"triggers" json:",omitempty"`
	// MaxPerHour caps the items the template's triggers make per clock hour (0: no cap);
	// past it a firing is logged and skipped (scheduler.Queue.SubmitTriggered).
	MaxPerHour int `yaml:"max_per_hour" json:",omitempty"`
}

// ConfigError names the template and field that are wrong.
type ConfigError struct {
	Template string // empty for deployment-level fields
	Field    string
	Err      error
}

func (e *ConfigError) Error() string {
	if e.Template != "" {
		return fmt.Sprintf("workitems: template %q: %s: %v", e.Template, e.Field, e.Err)
	}
	return fmt.Sprintf("workitems: %s: %v", e.Field, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// LoadConfig reads and validates a config file (with the built-in kinds).
func LoadConfig(path string) (*Config, error) { return LoadConfigWith(path, Kinds{}) }

// LoadConfigWith is LoadConfig validating with the registered kinds: a reload checks the new
// file against the kinds the process has registered.
func LoadConfigWith(path string, kinds Kinds) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workitems: config: %w", err)
	}
	return loadConfigBytes(path, b, kinds)
}

// loadConfigBytes is LoadConfigWith of the file's bytes b.
func loadConfigBytes(path string, b []byte, kinds Kinds) (*Config, error) {
	cfg, err := ParseConfigWith(b, kinds)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	if cfg.Dir, err = filepath.Abs(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("workitems: config: %w", err)
	}
	cfg.ResolveOperatorFiles()
	return cfg, nil
}

// ParseConfig parses YAML, rejects unknown keys, applies defaults and validates (with the
// built-in loop kinds).
func ParseConfig(b []byte) (*Config, error) { return ParseConfigWith(b, Kinds{}) }

// ParseConfigWith is ParseConfig validating with the registered kinds (Kinds{}: the built-in ones).
func ParseConfigWith(b []byte, kinds Kinds) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("workitems: config: malformed YAML: %w", err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("workitems: config: empty document")
	}
	if err := checkKeys(root.Content[0], reflect.TypeFor[Config](), "", fieldCache{}); err != nil {
		return nil, err
	}
	var cfg Config
	if err := root.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("workitems: config: %w", err)
	}
	cfg.applyDefaults()
	if err := cfg.ValidateWith(kinds); err != nil {
		return nil, err
	}
	cfg.cache = newConfigCache(&cfg)
	return &cfg, nil
}

// checkKeys walks the YAML tree against the Go type and names the first unknown key, with its
// template when it is inside one.
func checkKeys(n *yaml.Node, t reflect.Type, path string, fc fieldCache) error {
	return walkKeys(n, t, path, fc, nil)
}

// CheckTemplateKeys checks a YAML mapping of template fields (an overlay, such as an eval
// variant) the way the config checks a template: the first key that is not a field is an
// error naming its path and line. refuse, when set, is asked about every key's path first
// and may refuse it (a field the caller forces).
func CheckTemplateKeys(n *yaml.Node, refuse func(path string, line int) error) error {
	return walkKeys(n, reflect.TypeFor[Template](), "", fieldCache{}, refuse)
}

// UnknownKeyError is a key the config (or an overlay) has that the code does not read; the
// ConfigError around it names the key's path.
type UnknownKeyError struct{ Line int }

func (e *UnknownKeyError) Error() string { return fmt.Sprintf("line %d: unknown key", e.Line) }

func walkKeys(n *yaml.Node, t reflect.Type, path string, fc fieldCache, refuse func(path string, line int) error) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fieldErr(path, fmt.Errorf("line %d: expected a mapping", n.Line))
		}
		fields := fc.fields(t) // config_fast.go: built once per type and parse
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if refuse != nil {
				if err := refuse(join(path, k), n.Content[i].Line); err != nil {
					return err
				}
			}
			f, ok := fields[k]
			if !ok {
				return fieldErr(join(path, k), &UnknownKeyError{Line: n.Content[i].Line})
			}
			if err := walkKeys(n.Content[i+1], f.Type, join(path, k), fc, refuse); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil // the decoder reports the type error
		}
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if path == "templates" {
				p = "template#" + fmt.Sprint(i+1)
				if name := mapValue(c, "name"); name != "" {
					p = "template:" + name
				}
			}
			if err := walkKeys(c, t.Elem(), p, fc, refuse); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := walkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), fc, refuse); err != nil {
				return err
			}
		}
	}
	return nil
}

func mapValue(n *yaml.Node, key string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// fieldErr turns a path like "template:x.loop.kind" into a ConfigError naming template x.
func fieldErr(path string, err error) error {
	if rest, ok := strings.CutPrefix(path, "template:"); ok {
		name, field, _ := strings.Cut(rest, ".")
		return &ConfigError{Template: name, Field: field, Err: err}
	}
	if rest, ok := strings.CutPrefix(path, "template#"); ok {
		num, field, _ := strings.Cut(rest, ".")
		return &ConfigError{Template: "#" + num, Field: field, Err: err}
	}
	return &ConfigError{Field: path, Err: err}
}

func (c *Config) applyDefaults() {
	if c.Defaults.MaxAttempts == 0 {
		c.Defaults.MaxAttempts = workitems.DefaultMaxAttempts
	}
	c.applyForgeDefaults()
	c.Retention = c.Retention.WithDefaults()
	c.Notify = c.Notify.WithDefaults()
	c.Waits = c.Waits.WithDefaults()
	for i := range c.Templates {
		t := &c.Templates[i]
		t.Budget = c.Defaults.Budget.Merge(t.Budget)
		t.ItemBudget = c.Defaults.ItemBudget.Merge(t.ItemBudget)
		t.Sandbox = t.Sandbox.Merge(c.Sandbox)
		if t.MaxAttempts == 0 {
			t.MaxAttempts = c.Defaults.MaxAttempts
		}
		if t.CatchUp == "" {
			t.CatchUp = "none"
		}
		if t.CatchUpWindow == 0 {
			t.CatchUpWindow = workitems.Duration(6 * 3600 * 1e9)
		}
		if t.DoneCheck.Format == "" {
			t.DoneCheck.Format = workitems.FormatAuto
		}
		if t.Retry.SameFailureLimit == 0 {
			t.Retry.SameFailureLimit = 2
		}
		if t.Retry.InfraRetries == 0 {
			t.Retry.InfraRetries = 2
		}
		if t.Loop.NoProgressLimit == 0 {
			t.Loop.NoProgressLimit = 3
		}
		applyDeliverDefaults(t)
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate checks the whole config, with the built-in loop kinds; the error names the template
// and field.
func (c *Config) Validate() error { return c.ValidateWith(Kinds{}) }

// ValidateWith is Validate with the registered kinds (a nil registry: the built-in kinds).
func (c *Config) ValidateWith(kinds Kinds) error {
	loops := kinds.loops()
	if err := validateBudget(c.Defaults.Budget); err != nil {
		return &ConfigError{Field: "defaults.budget", Err: err}
	}
	if err := validateBudget(c.Defaults.ItemBudget); err != nil {
		return &ConfigError{Field: "defaults.item_budget", Err: err}
	}
	if c.Defaults.MaxAttempts < 0 {
		return &ConfigError{Field: "defaults.max_attempts", Err: errors.New("must not be negative")}
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	if err := c.Sandbox.validate(); err != nil {
		return &ConfigError{Field: "sandbox", Err: err}
	}
	for name, p := range c.Providers {
		if !slices.Contains(workitems.ProviderKinds(), p.Kind) {
			return &ConfigError{Field: "providers." + name + ".kind",
				Err: fmt.Errorf("%q is not one of %s", p.Kind, workitems.JoinKinds(workitems.ProviderKinds()))}
		}
		if p.Kind == workitems.ProviderReplay && p.File == "" {
			return &ConfigError{Field: "providers." + name + ".file", Err: errors.New("replay needs a recording file")}
		}
		if p.Prices.InputPerMTok < 0 || p.Prices.OutputPerMTok < 0 || p.Prices.CachedInputPerMTok < 0 {
			return &ConfigError{Field: "providers." + name + ".prices", Err: errors.New("must not be negative")}
		}
	}
	if err := c.validateForges(kinds.forges()); err != nil {
		return err
	}
	if err := c.Notify.validate(kinds.sinks()); err != nil {
		return err
	}
	if err := c.Waits.validate(); err != nil {
		return err
	}
	if err := c.Alertmanager.validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range c.Templates {
		t := &c.Templates[i]
		if err := c.validateTemplate(t, loops); err != nil {
			return err
		}
		if seen[t.Name] {
			return &ConfigError{Template: t.Name, Field: "name", Err: errors.New("duplicate template name")}
		}
		seen[t.Name] = true
	}
	return nil
}

func (c *Config) validateTemplate(t *Template, loops LoopRegistry) error {
	bad := func(field string, format string, args ...any) error {
		return &ConfigError{Template: t.Name, Field: field, Err: fmt.Errorf(format, args...)}
	}
	if t.Name == "" {
		return &ConfigError{Field: "templates", Err: errors.New("a template has no name")}
	}
	if !nameRE.MatchString(t.Name) {
		return bad("name", "use lower-case letters, digits, '.', '_' and '-' (at most 63)")
	}
	if t.Schedule != "" {
		if _, err := cron.ParseStandard(t.Schedule); err != nil {
			return bad("schedule", "%q: %v", t.Schedule, err)
		}
	}
	if t.CatchUp != "none" && t.CatchUp != "last" {
		return bad("catch_up", "%q is not none or last", t.CatchUp)
	}
	if t.MaxOpen < 0 {
		return bad("max_open", "must not be negative")
	}
	if t.MaxPerHour < 0 {
		return bad("max_per_hour", "must not be negative")
	}
	if t.DailyCostCapUSD < 0 {
		return bad("daily_cost_cap_usd", "must not be negative")
	}
	if t.MaxAttempts < 1 {
		return bad("max_attempts", "must be at least 1")
	}
	if strings.TrimSpace(t.Goal) == "" {
		return bad("goal", "missing")
	}
	if err := t.Sandbox.validate(); err != nil {
		return bad("sandbox", "%v", err)
	}
	if err := loops.ValidateLoop(c, t); err != nil {
		return err
	}
	if err := validateStrategyFields(t.Loop); err != nil {
		return LoopError(t, err)
	}
	if t.Loop.CommandTimeout < 0 {
		return bad("loop.command_timeout", "must not be negative")
	}
	if len(t.DoneCheck.Commands) == 0 && len(t.DoneCheck.Reports) == 0 && t.DoneCheck.CI == nil {
		return bad("done_check", "empty: give commands, reports or ci")
	}
	if !slices.Contains(workitems.AllReportFormats(), t.DoneCheck.Format) {
		return bad("done_check.format", "%q is not one of %s", t.DoneCheck.Format, workitems.JoinKinds(workitems.AllReportFormats()))
	}
	if t.DoneCheck.Timeout < 0 {
		return bad("done_check.timeout", "must not be negative")
	}
	if err := c.validateFleet(t, bad); err != nil {
		return err
	}
	// A fleet's deliver and CI sections are checked as one of its repositories sees them.
	probe := t
	if t.IsFleet() {
		probe = t.fleetProbe()
	}
	if err := c.validateDeliver(probe, bad); err != nil {
		return err
	}
	if err := c.validateCI(probe, bad); err != nil {
		return err
	}
	if err := c.validateTemplateNotify(t); err != nil {
		return err
	}
	if err := c.validateTriggers(t); err != nil {
		return err
	}
	if d := t.DoneCheck.Diff; d != nil && (d.MaxFiles < 0 || d.MaxLines < 0) {
		return bad("done_check.diff", "limits must not be negative")
	}
	if err := validateBudget(t.Budget); err != nil {
		return bad("budget", "%v", err)
	}
	if t.Budget.WallTime <= 0 {
		return bad("budget.wall_time", "missing: every attempt needs a wall-time budget")
	}
	if err := validateBudget(t.ItemBudget); err != nil {
		return bad("item_budget", "%v", err)
	}
	if t.Retry.SameFailureLimit < 1 {
		return bad("retry.same_failure_limit", "must be at least 1")
	}
	return nil
}

// Template returns the named template.
func (c *Config) Template(name string) (*Template, bool) {
	if t, ok, sure := c.cache.lookup(c, name); sure {
		return t, ok
	}
	for i := range c.Templates {
		if c.Templates[i].Name == name {
			return &c.Templates[i], true
		}
	}
	return nil, false
}

// FirstStrategy is the strategy an item's first attempt starts from: the template's
// loop.model and loop.prompt_variant.
func (t *Template) FirstStrategy() workitems.Strategy {
	return workitems.Strategy{Model: t.Loop.Model, PromptVariant: t.Loop.PromptVariant}
}
