package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"outerloop/proc"
	"outerloop/workitems/config"
)

// ParsePatch reads a unified diff (`git diff BASE` output) as diff evidence: the files it
// touches, lines added and deleted, secret-looking additions, and the template's diff limits
// (lim may be nil). It lets `outerloop verify --diff FILE` replay the scope and secret rules
// offline; binary files ("Binary files … differ", GIT binary patch) count as binary.
func ParsePatch(r io.Reader, base string, lim *config.DiffCheck) (*DiffEvidence, error) {
	d := &DiffEvidence{Base: base}
	var cur *DiffFile
	byPath := map[string]int{}
	file := func(path string) {
		if i, ok := byPath[path]; ok {
			cur = &d.Files[i]
			return
		}
		d.Files = append(d.Files, DiffFile{Path: path})
		byPath[path] = len(d.Files) - 1
		cur = &d.Files[len(d.Files)-1]
	}
	lr := newLineReader(r, 1<<20)
	inHunk := false
	for {
		raw, _, _, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("verify: reading patch: %w", err)
		}
		line := string(raw)
		switch {
		case strings.HasPrefix(line, "diff --git "):
			inHunk = false
			// "diff --git a/x b/x": the b/ side names the file (renames are off in git diff evidence).
			if i := strings.LastIndex(line, " b/"); i >= 0 {
				file(line[i+3:])
			}
		case strings.HasPrefix(line, "+++ ") && !inHunk:
			p := strings.TrimPrefix(line, "+++ ")
			if p == "/dev/null" {
				continue // a deletion: the --- side named it already
			}
			file(strings.TrimPrefix(strings.SplitN(p, "\t", 2)[0], "b/"))
		case strings.HasPrefix(line, "--- ") && !inHunk:
			p := strings.TrimPrefix(line, "--- ")
			if p != "/dev/null" && cur == nil {
				file(strings.TrimPrefix(strings.SplitN(p, "\t", 2)[0], "a/"))
			}
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case strings.HasPrefix(line, "Binary files ") || line == "GIT binary patch":
			if cur != nil {
				cur.Binary = true
			}
		case inHunk && cur != nil && strings.HasPrefix(line, "+"):
			cur.Added++
			kind := proc.SecretKind([]byte(line[1:]))
			if i := strings.Index(line, "[redacted "); kind == "" && i >= 0 {
				// Stored evidence has its secrets redacted; the marker still is the finding.
				kind, _, _ = strings.Cut(line[i+len("[redacted "):], "]")
			}
			if kind != "" {
				d.Secrets = append(d.Secrets, fmt.Sprintf("%s: %s", cur.Path, kind))
			}
		case inHunk && cur != nil && strings.HasPrefix(line, "-"):
			cur.Deleted++
		}
	}
	for _, f := range d.Files {
		d.Added += f.Added
		d.Deleted += f.Deleted
	}
	d.applyLimits(lim)
	return d, nil
}

// ciFromPayload turns a POST /api/evidence body into the CI evidence the template requires
// (every check in the payload when the template names none).
func ciFromPayload(r io.Reader, cfg *config.CICheck) (*CIEvidence, error) {
	var p EvidencePayload
	dec := newJSONDecoder(bufio.NewReader(io.LimitReader(r, EvidenceLimit)))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("verify: --ci: %w", err)
	}
	checks, err := p.validate()
	if err != nil {
		return nil, fmt.Errorf("verify: --ci: %w", err)
	}
	var required []string
	if cfg != nil && len(cfg.Required) > 0 {
		required = cfg.Required
	} else {
		for _, c := range checks {
			required = append(required, c.Name)
		}
	}
	sha := strings.ToLower(p.SHA)
	ev := &CIEvidence{SHA: sha, Required: required}
	ev.Checks, ev.Missing = pickRequired(checks, required, sha)
	return ev, nil
}

// newJSONDecoder is the decoder for posted evidence: unknown fields are refused, as the
// webhook refuses them.
func newJSONDecoder(r io.Reader) *json.Decoder {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	return dec
}
