package evals

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Variant is a named overlay of template fields: a partial template, in the shape of a
// template of outerloop.yaml, merged over every task's template. An empty overlay runs the
// templates as they are (except for what evals force, see Apply).
type Variant struct {
	Name    string         `json:"name"`
	Overlay map[string]any `json:"overlay,omitempty"`
	Source  string         `json:"source,omitempty"` // the file it was read from ("" when parsed from bytes)
	// Text is the overlay as written (ParseVariant): an experiment keeps it so that every
	// worker applies it to its own copy of the config.
	Text string `json:"text,omitempty"`
}

// text is the overlay as YAML: as written, or rendered from a Variant built in code.
func (v Variant) text() (string, error) {
	if v.Text != "" || len(v.Overlay) == 0 {
		return v.Text, nil
	}
	b, err := yaml.Marshal(v.Overlay)
	if err != nil {
		return "", fmt.Errorf("evals: variant %s: %w", v.Name, err)
	}
	return string(b), nil
}

var variantNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// VariantNameChars says what a variant name may be: it labels report columns and key parts.
const VariantNameChars = "letters, digits, '_' and '-' (1 to 32)"

// forcedFields are the template fields (by path) a variant may not set, and why: evals
// decide them (Apply), and a setting silently dropped would mislead.
var forcedFields = map[string]string{
	"name":       "the variant runs the task's template",
	"repo":       "the repository is the task's",
	"repos":      "a run is one item on the task's repository",
	"repos_from": "a run is one item on the task's repository",
	"fleet":      "a run is one item on the task's repository",
	"schedule":   "eval templates are never scheduled",
	"triggers":   "eval templates are never triggered by forge events",
	"deliver":    "evals deliver a patch only",
	// CI reads the checks of a pushed commit, and evals push nothing.
	"done_check.ci": "evals push nothing for CI to check",
	"notify.events": "eval items notify no one",
}

// ParseVariant parses a variant file: a mapping of template fields (an empty file changes
// nothing). A key that is not a template field is refused naming its path and line, as is a
// field evals force.
func ParseVariant(name string, b []byte) (Variant, error) {
	v := Variant{Name: name, Text: string(b)}
	if !variantNameRE.MatchString(name) {
		return v, fmt.Errorf("evals: variant %q: use %s", name, VariantNameChars)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return v, fmt.Errorf("evals: variant %s: malformed YAML: %w", name, err)
	}
	if len(root.Content) == 0 || root.Content[0].Tag == "!!null" {
		return v, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return v, fmt.Errorf("evals: variant %s: line %d: expected a mapping of template fields", name, doc.Line)
	}
	if err := checkOverlay(name, doc, true); err != nil {
		return v, err
	}
	if err := doc.Decode(&v.Overlay); err != nil {
		return v, fmt.Errorf("evals: variant %s: %w", name, err)
	}
	return v, nil
}

// LoadVariant reads a variant given on the command line as NAME=path.yaml.
func LoadVariant(spec string) (Variant, error) {
	name, path, ok := strings.Cut(spec, "=")
	if !ok || name == "" || path == "" {
		return Variant{}, fmt.Errorf("evals: variant %q: want NAME=FILE", spec)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Variant{Name: name}, fmt.Errorf("evals: variant %s: %w", name, err)
	}
	v, err := ParseVariant(name, b)
	if err != nil {
		return v, fmt.Errorf("%w (in %s)", err, path)
	}
	v.Source = path
	return v, nil
}

// checkOverlay checks the overlay's keys the way the config checks a template's
// (config.CheckTemplateKeys) and refuses a field evals force. Errors give the key's line
// when the overlay came from a file (lines), not when it was rendered from a Variant built in
// code.
func checkOverlay(name string, doc *yaml.Node, lines bool) error {
	at := func(line int) string {
		if !lines {
			return ""
		}
		return fmt.Sprintf("line %d: ", line)
	}
	err := config.CheckTemplateKeys(doc, func(path string, line int) error {
		if why, ok := forcedFields[path]; ok {
			return fmt.Errorf("evals: variant %s: %sfield %q cannot be set: %s", name, at(line), path, why)
		}
		return nil
	})
	var ce *config.ConfigError
	var uk *config.UnknownKeyError
	if errors.As(err, &ce) && errors.As(err, &uk) {
		return fmt.Errorf("evals: variant %s: %sfield %q is not a template field", name, at(uk.Line), ce.Field)
	}
	if errors.As(err, &ce) { // a struct given a scalar: the decoder's type error, said here
		return fmt.Errorf("evals: variant %s: field %q: %w", name, ce.Field, ce.Err)
	}
	return err
}

// Apply returns the template a task runs under this variant: the overlay merged over t (maps
// merge key by key, lists and scalars replace, null clears), the task's repo and goal when it
// has them, and these fields forced so that an eval cannot reach production:
//
//   - deliver: mode patch and nothing else (no forge, repo, branch, labels, automerge or
//     review): nothing is pushed, no pull request is opened, no comment is written;
//   - done_check.ci: dropped, since it reads the checks of a pushed commit and nothing is
//     pushed (a done check left empty is refused by the config's own rule);
//   - schedule and triggers: cleared, so the template makes no items by itself;
//   - notify.events: empty, so no one is notified about eval items;
//   - repos, repos_from and fleet: replaced by the task's repo when it has one (a fleet
//     template's run is one item on the task's repository).
//
// The result is then given the deployment's defaults and validated by the config's own code
// (config.Config.EffectiveTemplate): a variant is refused with the error the same template
// written in outerloop.yaml would get. The task's ref is not a template's: the runner gives
// it to each run's item (workitems.Item.Ref), where the worker starts the workspace.
func (v Variant) Apply(cfg *config.Config, t *config.Template, task Task) (*config.Template, error) {
	return v.ApplyWith(cfg, nil, t, task)
}

// ApplyWith is Apply validating loops with the kinds of loops (nil: built-in), for a process
// that registered its own loop kinds.
func (v Variant) ApplyWith(cfg *config.Config, loops config.LoopRegistry, t *config.Template, task Task) (*config.Template, error) {
	// t belongs to cfg: decode the overlay into a deep copy, since decoding writes through
	// pointers (done_check.ci) and into maps.
	c := deepCopy(reflect.ValueOf(*t)).Interface().(config.Template)
	if len(v.Overlay) > 0 {
		b, err := yaml.Marshal(v.Overlay)
		if err != nil {
			return nil, fmt.Errorf("evals: variant %s: %w", v.Name, err)
		}
		var root yaml.Node
		if err := yaml.Unmarshal(b, &root); err != nil {
			return nil, fmt.Errorf("evals: variant %s: %w", v.Name, err)
		}
		// Checked again: a Variant may have been built in code rather than parsed.
		if err := checkOverlay(v.Name, root.Content[0], false); err != nil {
			return nil, err
		}
		if err := root.Content[0].Decode(&c); err != nil {
			return nil, fmt.Errorf("evals: variant %s: template %s: %w", v.Name, t.Name, err)
		}
	}
	c.Name = t.Name
	if task.Repo != "" {
		// A run is one item on one repository: a fleet template's repos and limits give way
		// to the task's repo (Suite.Check refuses a fleet task without one).
		c.Repo, c.Repos, c.ReposFrom, c.Fleet = task.Repo, nil, nil, nil
	}
	if task.Goal != "" {
		c.Goal = task.Goal
	}
	c.Deliver = config.Deliver{Mode: workitems.DeliverPatch}
	c.DoneCheck.CI = nil
	c.Schedule, c.Triggers = "", nil
	c.Notify.Events = &[]workitems.NotifyEvent{}
	eff, err := cfg.EffectiveTemplate(c, loops)
	if err != nil {
		return nil, fmt.Errorf("evals: variant %s: %w", v.Name, err)
	}
	return eff, nil
}

// deepCopy copies v and everything it points to, so that the copy shares no pointer, slice or
// map with v.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(deepCopy(v.Elem()))
		return n
	case reflect.Struct:
		n := reflect.New(v.Type()).Elem()
		n.Set(v)
		for i := range v.NumField() {
			if n.Field(i).CanSet() {
				n.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return n
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			n.Index(i).Set(deepCopy(v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			n.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return n
	}
	return v
}
