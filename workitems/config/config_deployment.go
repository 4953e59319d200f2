package config

import (
	"bytes"
	"fmt"
	"os"
)

// LoadDeploymentConfig reads a config file's deployment-level settings (redis:, defaults:,
// sandbox:, forges:, notify:, retention:, ...), parsed and validated as LoadConfig does, and
// leaves its templates: out: they are neither parsed nor validated, and the Config has none.
// It is for a command that reads or changes items and reads no template (`outerloop items`,
// `escalations`, `gc`): at 10k templates the templates are nearly all of a parse.
//
// The templates: section is cut from the file's text; a top level this cannot cut with
// certainty (flow style, a directive, a second document, a quoted or repeated key), or a rest
// that does not parse (an alias to an anchor inside templates:), is loaded whole, as
// LoadConfig does, with its errors.
func LoadDeploymentConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workitems: config: %w", err)
	}
	if rest, ok := withoutTemplates(b); ok {
		if cfg, err := loadConfigBytes(path, rest, Kinds{}); err == nil {
			return cfg, nil
		}
	}
	return loadConfigBytes(path, b, Kinds{})
}

// withoutTemplates returns the YAML document b without its top-level templates: section, and
// false when b's top level is not a block mapping of plain keys, one per line at column 0,
// each key once (what a config file is). A line at column 0 is then a key, a comment, or a "-"
// entry of a sequence under the key above; every other line is indented or blank.
func withoutTemplates(b []byte) ([]byte, bool) {
	rest, _, ok := splitTemplates(b)
	return rest, ok
}

// splitTemplates cuts b (as withoutTemplates reads it) into the document without its
// templates: section, and that section: its "templates:" line and every line under it (a
// slice of b: a top-level key's lines are contiguous).
func splitTemplates(b []byte) (rest, section []byte, ok bool) {
	rest = make([]byte, 0, 4096)
	seen := map[string]bool{}
	cutting := false
	start, end := -1, -1
	for off, lines := 0, b; len(lines) > 0; {
		var line []byte
		line, lines = nextLine(lines)
		switch c := line[0]; {
		case c == ' ' || c == '\n' || c == '\r' || c == '#':
			// indented, blank or a comment: part of the section under way
		case c == '-':
			if bytes.HasPrefix(line, []byte("---")) {
				if len(seen) > 0 {
					return nil, nil, false // a second document
				}
			} else if len(seen) == 0 {
				return nil, nil, false // a top-level sequence
			}
		default:
			key, ok := plainKey(line)
			if !ok || seen[key] {
				return nil, nil, false
			}
			seen[key] = true
			if cutting {
				end = off
			}
			cutting = key == "templates"
			if cutting {
				start = off
			}
		}
		if !cutting {
			rest = append(rest, line...)
		}
		off += len(line)
	}
	if start >= 0 {
		if end < start {
			end = len(b)
		}
		section = b[start:end:end]
	}
	return rest, section, true
}

// nextLine splits b after its first line (with its newline).
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

// plainKey is the key of a line "key:" or "key: value" whose key is a plain word.
func plainKey(line []byte) (string, bool) {
	i := 0
	for i < len(line) && (line[i] == '_' || line[i] == '-' || 'a' <= line[i] && line[i] <= 'z' ||
		'A' <= line[i] && line[i] <= 'Z' || '0' <= line[i] && line[i] <= '9') {
		i++
	}
	if i == 0 || i == len(line) || line[i] != ':' {
		return "", false
	}
	if i+1 < len(line) && line[i+1] != ' ' && line[i+1] != '\t' && line[i+1] != '\n' && line[i+1] != '\r' {
		return "", false // "a:b" is a plain scalar, not a key
	}
	return string(line[:i]), true
}
