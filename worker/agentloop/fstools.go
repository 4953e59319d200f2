package agentloop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Limits of the file tools.
const (
	maxReadLines    = 2000
	maxListEntries  = 1000
	maxSearchHits   = 200
	maxSearchedFile = 1 << 20
)

// errEscape is matched by every path that would leave the workspace.
var errEscape = errors.New("path escapes the workspace")

// rel checks a model-given path and returns it cleaned and relative to the workspace. It
// refuses absolute paths, `..` escapes and symlinks that point outside; the os.Root every
// file tool uses refuses them again at the system call.
func (tb *toolbox) rel(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is absolute: %w (use a path relative to the workspace)", p, errEscape)
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q: %w", p, errEscape)
	}
	// Follow the existing part of the path: a symlink inside may point outside.
	parts := strings.Split(c, string(filepath.Separator))
	for i := range parts {
		full := filepath.Join(tb.dir, filepath.Join(parts[:i+1]...))
		fi, err := os.Lstat(full)
		if err != nil {
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(full)
		if err != nil {
			return "", fmt.Errorf("path %q: symlink %q does not resolve inside the workspace: %w", p, filepath.Join(parts[:i+1]...), errEscape)
		}
		if r, err := filepath.Rel(tb.dir, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("path %q: symlink %q points outside: %w", p, filepath.Join(parts[:i+1]...), errEscape)
		}
	}
	return c, nil
}

func (tb *toolbox) readFile(_ context.Context, raw string) toolResult {
	var args struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decodeArgs("read_file", raw, &args, "path"); err != nil {
		return errResult("%v", err)
	}
	p, err := tb.rel(args.Path)
	if err != nil {
		return errResult("read_file: %v", err)
	}
	b, err := tb.root.ReadFile(p)
	if err != nil {
		return errResult("read_file: %v", err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	from := max(args.Offset, 1) - 1
	if from > len(lines) {
		return errResult("read_file: offset %d is past the end (%d lines)", args.Offset, len(lines))
	}
	n := args.Limit
	if n <= 0 || n > maxReadLines {
		n = maxReadLines
	}
	to := min(from+n, len(lines))
	out := strings.Join(lines[from:to], "")
	if to < len(lines) {
		out += fmt.Sprintf("[%d more lines; read on with offset %d]", len(lines)-to, to+1)
	}
	return toolResult{out: out}
}

func (tb *toolbox) listDir(_ context.Context, raw string) toolResult {
	var args struct {
		Path string `json:"path"`
	}
	if err := decodeArgs("list_dir", raw, &args); err != nil {
		return errResult("%v", err)
	}
	if args.Path == "" {
		args.Path = "."
	}
	p, err := tb.rel(args.Path)
	if err != nil {
		return errResult("list_dir: %v", err)
	}
	entries, err := fs.ReadDir(tb.root.FS(), filepath.ToSlash(p))
	if err != nil {
		return errResult("list_dir: %v", err)
	}
	var b strings.Builder
	for i, e := range entries {
		if i == maxListEntries {
			fmt.Fprintf(&b, "[%d more entries]\n", len(entries)-i)
			break
		}
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		b.WriteString(name + "\n")
	}
	return toolResult{out: b.String()}
}

func (tb *toolbox) search(ctx context.Context, raw string) toolResult {
	var args struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Glob    string `json:"glob"`
	}
	if err := decodeArgs("search", raw, &args, "pattern"); err != nil {
		return errResult("%v", err)
	}
	re, err := regexp.Compile(args.Pattern)
	if err != nil {
		return errResult("search: pattern: %v", err)
	}
	if args.Path == "" {
		args.Path = "."
	}
	p, err := tb.rel(args.Path)
	if err != nil {
		return errResult("search: %v", err)
	}
	fsys := tb.root.FS()
	var hits []string
	more := false
	err = fs.WalkDir(fsys, filepath.ToSlash(p), func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if args.Glob != "" {
			if ok, _ := path.Match(args.Glob, d.Name()); !ok {
				return nil
			}
		}
		if fi, err := d.Info(); err != nil || fi.Size() > maxSearchedFile {
			return nil
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64<<10), maxSearchedFile)
		for line := 1; sc.Scan(); line++ {
			if re.Match(sc.Bytes()) {
				if len(hits) == maxSearchHits {
					more = true
					return fs.SkipAll
				}
				hits = append(hits, fmt.Sprintf("%s:%d: %s", name, line, truncate(sc.Text(), 400)))
			}
		}
		return nil
	})
	if err != nil {
		return errResult("search: %v", err)
	}
	sort.Strings(hits)
	out := strings.Join(hits, "\n")
	if len(hits) == 0 {
		out = "no matches"
	}
	if more {
		out += fmt.Sprintf("\n[stopped after %d matches]", maxSearchHits)
	}
	return toolResult{out: out}
}

func (tb *toolbox) writeFile(_ context.Context, raw string) toolResult {
	var args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeArgs("write_file", raw, &args, "path", "content"); err != nil {
		return errResult("%v", err)
	}
	p, err := tb.rel(args.Path)
	if err != nil {
		return errResult("write_file: %v", err)
	}
	if err := tb.write(p, []byte(args.Content)); err != nil {
		return errResult("write_file: %v", err)
	}
	return toolResult{out: fmt.Sprintf("wrote %d bytes to %s", len(args.Content), p)}
}

// write creates p's directories and writes content, all through the root.
func (tb *toolbox) write(p string, content []byte) error {
	if dir := filepath.Dir(p); dir != "." {
		if err := tb.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return tb.root.WriteFile(p, content, 0o644)
}
