package verify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"outerloop/proc"
	"outerloop/workitems/config"
)

// DiffEvidence is what the attempt changed in the workspace against its base commit: tracked
// changes (committed or not) and untracked files that git does not ignore.
type DiffEvidence struct {
	Base       string     `json:"base"`
	Module     string     `json:"module,omitempty"` // Go module path of the workspace, to map packages to files
	Files      []DiffFile `json:"files"`
	Added      int        `json:"added"`
	Deleted    int        `json:"deleted"`
	Violations []string   `json:"violations,omitempty"` // out of allowed paths, over limits
	Secrets    []string   `json:"secrets,omitempty"`    // "path:line: kind" (never the secret itself)
}

// DiffFile is one changed file.
type DiffFile struct {
	Path      string `json:"path"`
	Added     int    `json:"added"`
	Deleted   int    `json:"deleted"`
	Binary    bool   `json:"binary,omitempty"`
	Untracked bool   `json:"untracked,omitempty"`
}

// CollectDiff measures the workspace against base and applies the template's limits (lim may be
// nil: measure only). Untracked, not ignored files count as added. gitDir is the worker's own
// git directory of the workspace (Request.GitDir); "" reads the workspace's .git.
func CollectDiff(ctx context.Context, workspace, gitDir, base string, lim *config.DiffCheck) (*DiffEvidence, error) {
	return collectDiff(ctx, worktree{dir: workspace, gitDir: gitDir}, base, lim)
}

func collectDiff(ctx context.Context, w worktree, base string, lim *config.DiffCheck) (*DiffEvidence, error) {
	if base == "" {
		return nil, errors.New("verify: diff: no base commit (the workspace is not a git repository)")
	}
	d := &DiffEvidence{Base: base, Module: goModule(w)}
	out, err := w.git(ctx, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, "--")
	if err != nil {
		return nil, err
	}
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		fields := strings.SplitN(string(rec), "\t", 3)
		if len(fields) != 3 {
			continue
		}
		f := DiffFile{Path: fields[2]}
		if fields[0] == "-" {
			f.Binary = true
		} else {
			f.Added, _ = strconv.Atoi(fields[0])
			f.Deleted, _ = strconv.Atoi(fields[1])
		}
		d.Files = append(d.Files, f)
	}
	untracked, err := w.git(ctx, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return nil, err
	}
	for p := range bytes.SplitSeq(untracked, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		f := DiffFile{Path: string(p), Untracked: true}
		lines, binary, secrets := scanFile(w, string(p))
		f.Added, f.Binary = lines, binary
		for _, s := range secrets {
			d.Secrets = append(d.Secrets, f.Path+":"+s)
		}
		d.Files = append(d.Files, f)
	}
	for _, f := range d.Files {
		d.Added += f.Added
		d.Deleted += f.Deleted
	}
	if err := d.scanAdditions(ctx, w); err != nil {
		return nil, err
	}
	d.applyLimits(lim)
	return d, nil
}

// applyLimits records every way the diff breaks the template's limits.
func (d *DiffEvidence) applyLimits(lim *config.DiffCheck) {
	if lim == nil {
		return
	}
	if len(lim.AllowedPaths) > 0 {
		var outside []string
		for _, f := range d.Files {
			if !matchAny(lim.AllowedPaths, f.Path) {
				outside = append(outside, f.Path)
			}
		}
		if len(outside) > 0 {
			d.Violations = append(d.Violations, fmt.Sprintf("%d files outside allowed paths (%s): %s",
				len(outside), strings.Join(lim.AllowedPaths, ", "), listClip(outside, 5)))
		}
	}
	if lim.MaxFiles > 0 && len(d.Files) > lim.MaxFiles {
		d.Violations = append(d.Violations, fmt.Sprintf("%d files changed, max_files is %d", len(d.Files), lim.MaxFiles))
	}
	if lines := d.Added + d.Deleted; lim.MaxLines > 0 && lines > lim.MaxLines {
		d.Violations = append(d.Violations, fmt.Sprintf("%d lines changed, max_lines is %d", lines, lim.MaxLines))
	}
}

// scanAdditions streams the added lines of tracked files through the secret patterns.
func (d *DiffEvidence) scanAdditions(ctx context.Context, w worktree) error {
	cmd := w.command(ctx, "diff", "-U0", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv",
		"--src-prefix=a/", "--dst-prefix=b/", d.Base, "--")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("verify: git diff: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("verify: git diff: %w", err)
	}
	lr := newLineReader(stdout, 64<<10)
	file, lineNo := "", 0
	for {
		line, _, _, err := lr.next()
		if err != nil {
			break
		}
		switch {
		case bytes.HasPrefix(line, []byte("+++ ")):
			file = strings.TrimPrefix(string(line[4:]), "b/")
		case bytes.HasPrefix(line, []byte("@@ ")):
			// @@ -a,b +c,d @@: the added lines start at c.
			if _, after, ok := strings.Cut(string(line), " +"); ok {
				num, _, _ := strings.Cut(after, ",")
				num, _, _ = strings.Cut(num, " ")
				lineNo, _ = strconv.Atoi(num)
			}
		case len(line) > 0 && line[0] == '+':
			if kind := proc.SecretKind(line[1:]); kind != "" && len(d.Secrets) < 50 {
				d.Secrets = append(d.Secrets, fmt.Sprintf("%s:%d: %s", file, lineNo, kind))
			}
			lineNo++
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("verify: git diff -U0 %s: %w", d.Base, err)
	}
	return nil
}

// scanFile counts lines of an untracked file and scans it for secrets, reading at most 8 MiB.
// A link (git lists it as untracked) is not followed out of the workspace, nor is anything
// but a regular file read.
func scanFile(w worktree, rel string) (lines int, binary bool, secrets []string) {
	f, err := w.open(rel)
	if err != nil {
		return 0, false, nil
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, 8<<20))
	head, _ := br.Peek(8 << 10)
	if bytes.IndexByte(head, 0) >= 0 {
		return 0, true, nil
	}
	lr := newLineReader(br, 64<<10)
	for {
		line, _, _, err := lr.next()
		if err != nil {
			return lines, false, secrets
		}
		lines++
		if kind := proc.SecretKind(line); kind != "" && len(secrets) < 10 {
			secrets = append(secrets, fmt.Sprintf("%d: %s", lines, kind))
		}
	}
}

// goModule returns the module path in the workspace's go.mod, or "".
func goModule(w worktree) string {
	b, err := w.readFile("go.mod", 1<<20)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Touches reports whether a test's code is among the changed files: for Go, a changed file in the
// test's package directory; for other reports, a changed file whose path matches the test's
// class or module (com.acme.FooTest → com/acme/FooTest.java, tests.test_x → tests/test_x.py).
func (d *DiffEvidence) Touches(t *TestCase) bool {
	for _, f := range d.Files {
		dir := path.Dir(f.Path)
		if d.Module != "" && strings.HasSuffix(f.Path, ".go") {
			pkg := d.Module
			if dir != "." {
				pkg += "/" + dir
			}
			if t.Suite == pkg {
				return true
			}
			continue
		}
		noExt := strings.TrimSuffix(f.Path, path.Ext(f.Path))
		if t.Suite != "" {
			asPath := strings.ReplaceAll(t.Suite, ".", "/")
			if noExt == asPath || strings.HasSuffix(noExt, "/"+asPath) {
				return true
			}
		}
		if base := path.Base(noExt); len(base) > 3 && (strings.Contains(t.Suite, base) || strings.Contains(t.ID, base)) {
			return true
		}
	}
	return false
}

// matchAny reports whether p matches one of the globs. Globs match the whole slash-separated
// path: "*" and "?" stay within a path element, "**" spans elements ("**/*.go": any Go file,
// "internal/**": everything under internal/).
func matchAny(globs []string, p string) bool {
	for _, g := range globs {
		if globMatch(g, p) {
			return true
		}
	}
	return false
}

func globMatch(glob, p string) bool {
	gs, ps := strings.Split(glob, "/"), strings.Split(p, "/")
	return matchParts(gs, ps)
}

func matchParts(gs, ps []string) bool {
	for len(gs) > 0 {
		if gs[0] == "**" {
			rest := gs[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(ps); i++ {
				if matchParts(rest, ps[i:]) {
					return true
				}
			}
			return false
		}
		if len(ps) == 0 {
			return false
		}
		if ok, err := path.Match(gs[0], ps[0]); err != nil || !ok {
			return false
		}
		gs, ps = gs[1:], ps[1:]
	}
	return len(ps) == 0
}
