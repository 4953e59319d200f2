// Evals run a set of tasks (a suite file, or past items) under named variants of their
// templates, isolated from production. This file holds the suite: the tasks and their checks
// against a config; variant.go the overlays; fromitems.go tasks made from past items.

package evals

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Task is one task of a suite: a template run on a repository at a ref with an input.
type Task struct {
	ID       string `yaml:"id" json:"id"`
	Template string `yaml:"template" json:"template"`
	Repo     string `yaml:"repo,omitempty" json:"repo,omitempty"` // default: the template's repo
	Ref      string `yaml:"ref,omitempty" json:"ref,omitempty"`   // commit or branch; default: the repo's default branch
	Input    string `yaml:"input,omitempty" json:"input,omitempty"`
	Goal     string `yaml:"goal,omitempty" json:"goal,omitempty"` // from-items: the item's goal (default: the template's)
}

// Suite is a named list of tasks.
type Suite struct {
	Name  string `yaml:"name" json:"name"`
	Tasks []Task `yaml:"tasks" json:"tasks"`
}

// IDChars says which characters a task id (and a suite name) may use: they become parts of
// Redis keys and item ids, so no ':' (the key separator), spaces or slashes.
const IDChars = "letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)"

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidID reports whether s may be a task id or a suite name (see IDChars).
func ValidID(s string) bool { return idRE.MatchString(s) }

// ParseSuite parses a suite file strictly: unknown keys are refused naming the key and its
// line, the suite needs a name, every task an id and a template, and ids are unique.
func ParseSuite(b []byte) (*Suite, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&root); err != nil {
		return nil, fmt.Errorf("evals: suite: malformed YAML: %w", err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("evals: suite: empty document")
	}
	doc := root.Content[0]
	if err := checkSuiteKeys(doc); err != nil {
		return nil, err
	}
	var s Suite
	if err := doc.Decode(&s); err != nil {
		return nil, fmt.Errorf("evals: suite: %w", err)
	}
	if s.Name == "" {
		return nil, errors.New("evals: suite: name: missing")
	}
	if !ValidID(s.Name) {
		return nil, fmt.Errorf("evals: suite: name %q: use %s", s.Name, IDChars)
	}
	if len(s.Tasks) == 0 {
		return nil, fmt.Errorf("evals: suite %s: tasks: missing", s.Name)
	}
	seen := map[string]int{} // id → task number (1-based)
	var errs []error
	for i, t := range s.Tasks {
		at := fmt.Sprintf("evals: suite %s: task #%d", s.Name, i+1)
		switch {
		case t.ID == "":
			errs = append(errs, fmt.Errorf("%s: id: missing", at))
		case !ValidID(t.ID):
			errs = append(errs, fmt.Errorf("%s: id %q: use %s", at, t.ID, IDChars))
		case seen[t.ID] > 0:
			errs = append(errs, fmt.Errorf("%s: id %q: duplicate of task #%d", at, t.ID, seen[t.ID]))
		default:
			seen[t.ID] = i + 1
		}
		if t.Template == "" {
			errs = append(errs, fmt.Errorf("%s (%s): template: missing", at, t.ID))
		}
		if t.Ref != "" {
			if err := workitems.CheckBranchName(t.Ref); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): ref: %w", at, t.ID, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &s, nil
}

// checkSuiteKeys refuses a key the suite does not know, naming it and its line: a misspelt
// "input" must not silently run a task without its input.
func checkSuiteKeys(doc *yaml.Node) error {
	if doc.Kind != yaml.MappingNode {
		return fmt.Errorf("evals: suite: line %d: expected a mapping", doc.Line)
	}
	taskKeys := map[string]bool{"id": true, "template": true, "repo": true, "ref": true, "input": true, "goal": true}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		switch k.Value {
		case "name":
		case "tasks":
			if v.Kind != yaml.SequenceNode {
				return fmt.Errorf("evals: suite: tasks: line %d: expected a list", v.Line)
			}
			for n, t := range v.Content {
				if t.Kind != yaml.MappingNode {
					return fmt.Errorf("evals: suite: task #%d: line %d: expected a mapping", n+1, t.Line)
				}
				for j := 0; j+1 < len(t.Content); j += 2 {
					if key := t.Content[j]; !taskKeys[key.Value] {
						return fmt.Errorf("evals: suite: task #%d: line %d: unknown key %q", n+1, key.Line, key.Value)
					}
				}
			}
		default:
			return fmt.Errorf("evals: suite: line %d: unknown key %q", k.Line, k.Value)
		}
	}
	return nil
}

// LoadSuite reads and parses a suite file.
func LoadSuite(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evals: suite: %w", err)
	}
	s, err := ParseSuite(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// Check checks the suite against a config: every task's template exists, and every task has
// a repository (its own or its template's). All problems are reported at once.
func (s *Suite) Check(cfg *config.Config) error {
	var errs []error
	for _, t := range s.Tasks {
		tmpl, ok := cfg.Template(t.Template)
		if !ok {
			errs = append(errs, fmt.Errorf("evals: suite %s: task %s: template %q is not in the config", s.Name, t.ID, t.Template))
			continue
		}
		if t.Repo == "" && tmpl.IsFleet() {
			errs = append(errs, fmt.Errorf("evals: suite %s: task %s: template %q is a fleet (repos or repos_from): give the task's repo, a run is one item on one repository", s.Name, t.ID, t.Template))
			continue
		}
		if t.Repo == "" && tmpl.Repo == "" {
			errs = append(errs, fmt.Errorf("evals: suite %s: task %s: no repo, and template %q has none", s.Name, t.ID, t.Template))
		}
	}
	return errors.Join(errs...)
}
