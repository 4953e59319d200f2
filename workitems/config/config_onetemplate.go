package config

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// LoadTemplateConfig reads a config file's deployment-level settings and the one template
// named name, parsed and validated as LoadConfig does; the file's other templates are neither
// parsed nor validated, and the Config holds only that one. It is for a command that reads one
// template's state (`outerloop templates status|history|controls NAME`): at 10k templates,
// parsing the others is nearly all of its time.
//
// The template is cut from the file's text as LoadDeploymentConfig cuts templates: (a block
// sequence of block mappings, each with a plain or quoted "name:" at the entry's own level).
// Whatever cannot be cut so with certainty — the name found in no entry or in two, an entry
// in flow style, an alias to an anchor in another template, a rest that does not parse — is
// loaded whole, as LoadConfig does, with its errors (an unknown name included).
//
// Its Version is not the file's (the other templates are not in it): a command that records
// the config's version (enqueue, templates run) loads the whole file.
func LoadTemplateConfig(path, name string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workitems: config: %w", err)
	}
	if one, ok := withOneTemplate(b, name); ok {
		if cfg, err := loadConfigBytes(path, one, Kinds{}); err == nil && len(cfg.Templates) == 1 && cfg.Templates[0].Name == name {
			return cfg, nil
		}
	}
	return loadConfigBytes(path, b, Kinds{})
}

// withOneTemplate returns the document b with its templates: section holding only the entry
// whose name is name, and false when that entry is not found exactly once.
func withOneTemplate(b []byte, name string) ([]byte, bool) {
	rest, section, ok := splitTemplates(b)
	if !ok || len(section) == 0 {
		return nil, false
	}
	header, body := nextLine(section)
	if strings.TrimSpace(string(header)) != "templates:" {
		return nil, false // "templates: [...]" or an anchor: not a block sequence to cut
	}
	var keep []byte
	found := 0
	for _, e := range templateEntries(body) {
		if e.name == name {
			keep = e.text
			found++
		}
	}
	if found != 1 {
		return nil, false
	}
	out := make([]byte, 0, len(rest)+len(header)+len(keep)+1)
	out = append(out, rest...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, header...)
	return append(out, keep...), true
}

// templateEntry is one entry of the templates: sequence, as text, with its name ("" when it
// cannot be read from the text with certainty).
type templateEntry struct {
	name string
	text []byte
}

// templateEntries splits a templates: section's body into its entries: each starts with a "- "
// line at the indentation of the first one; comments and blank lines between entries go with
// the entry before.
func templateEntries(body []byte) []templateEntry {
	var out []templateEntry
	indent := -1
	for lines := body; len(lines) > 0; {
		var line []byte
		line, lines = nextLine(lines)
		n := len(line) - len(bytes.TrimLeft(line, " "))
		content := bytes.TrimRight(line[n:], "\r\n")
		if indent < 0 {
			if len(content) == 0 || content[0] == '#' {
				continue
			}
			indent = n
		}
		if n == indent && (bytes.HasPrefix(content, []byte("- ")) || bytes.Equal(content, []byte("-"))) {
			out = append(out, templateEntry{})
		}
		if len(out) == 0 {
			return nil // a first line that starts no entry: not a block sequence
		}
		e := &out[len(out)-1]
		e.text = append(e.text, line...)
		// The entry's keys sit two columns in: on its "- " line, or alone at indent+2.
		var key []byte
		switch {
		case n == indent && bytes.HasPrefix(content, []byte("- ")):
			key = bytes.TrimLeft(content[2:], " ")
			if len(content)-len(key) != 2 {
				key = nil // "-   name:": keys further in; read as uncertain
			}
		case n == indent+2:
			key = content
		}
		if v, ok := bytes.CutPrefix(key, []byte("name:")); ok {
			if name, ok := scalarName(v); ok && e.name == "" {
				e.name = name
			} else {
				e.name = "\x00" // a second name, or one not read with certainty: matches nothing
			}
		}
	}
	return out
}

// scalarName reads a name's value: a plain word, or one in quotes, with an optional comment.
func scalarName(v []byte) (string, bool) {
	s := strings.TrimSpace(string(v))
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	if s == "" || strings.ContainsAny(s, "\"'\\#{}[],&*!|>%@`:") {
		return "", false
	}
	return s, true
}
