package agentloop

// apply_patch takes the Codex patch format: file operations between two markers, each
// hunk found by its context lines rather than line numbers, so a model need not count lines.
//
//	*** Begin Patch
//	*** Add File: path/new.go
//	+package x
//	*** Delete File: path/old.go
//	*** Update File: path/file.go
//	*** Move to: path/renamed.go        (optional)
//	@@ func Refund(                      (optional anchor: a line to find first)
//	 context line
//	-removed line
//	+added line
//	*** End of File                      (optional: the hunk is at the end of the file)
//	*** End Patch
//
// Every hunk of every file is located before anything is written; a hunk that does not match
// leaves the workspace untouched. Lines are matched exactly, then ignoring trailing white
// space, then ignoring surrounding white space.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

type patchHunk struct {
	anchor   string
	old, new []string
	eof      bool
}

type patchOp struct {
	kind   string // add | delete | update
	path   string
	moveTo string
	lines  []string // add: the content
	hunks  []patchHunk
}

func parsePatch(text string) ([]patchOp, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "*** Begin Patch" {
		return nil, errors.New("the patch must start with \"*** Begin Patch\"")
	}
	if strings.TrimSpace(lines[len(lines)-1]) != "*** End Patch" {
		return nil, errors.New("the patch must end with \"*** End Patch\"")
	}
	body := lines[1 : len(lines)-1]
	var ops []patchOp
	for i := 0; i < len(body); {
		l := body[i]
		lineNo := i + 2
		switch {
		case strings.HasPrefix(l, "*** Add File: "):
			op := patchOp{kind: "add", path: strings.TrimSpace(strings.TrimPrefix(l, "*** Add File: "))}
			i++
			for i < len(body) && !strings.HasPrefix(body[i], "*** ") {
				if !strings.HasPrefix(body[i], "+") {
					return nil, fmt.Errorf("patch line %d: a line of an added file must start with '+'", i+2)
				}
				op.lines = append(op.lines, body[i][1:])
				i++
			}
			ops = append(ops, op)
		case strings.HasPrefix(l, "*** Delete File: "):
			ops = append(ops, patchOp{kind: "delete", path: strings.TrimSpace(strings.TrimPrefix(l, "*** Delete File: "))})
			i++
		case strings.HasPrefix(l, "*** Update File: "):
			op := patchOp{kind: "update", path: strings.TrimSpace(strings.TrimPrefix(l, "*** Update File: "))}
			i++
			if i < len(body) && strings.HasPrefix(body[i], "*** Move to: ") {
				op.moveTo = strings.TrimSpace(strings.TrimPrefix(body[i], "*** Move to: "))
				i++
			}
			var h *patchHunk
			for i < len(body) && (!strings.HasPrefix(body[i], "*** ") || body[i] == "*** End of File") {
				l := body[i]
				switch {
				case strings.HasPrefix(l, "@@"):
					op.hunks = append(op.hunks, patchHunk{anchor: strings.TrimSpace(strings.TrimPrefix(l, "@@"))})
					h = &op.hunks[len(op.hunks)-1]
				case l == "*** End of File":
					if h == nil {
						return nil, fmt.Errorf("patch line %d: \"*** End of File\" outside a hunk", i+2)
					}
					h.eof = true
				default:
					if h == nil {
						op.hunks = append(op.hunks, patchHunk{})
						h = &op.hunks[len(op.hunks)-1]
					}
					switch {
					case l == "":
						h.old, h.new = append(h.old, ""), append(h.new, "")
					case l[0] == ' ':
						h.old, h.new = append(h.old, l[1:]), append(h.new, l[1:])
					case l[0] == '-':
						h.old = append(h.old, l[1:])
					case l[0] == '+':
						h.new = append(h.new, l[1:])
					default:
						return nil, fmt.Errorf("patch line %d: a hunk line must start with ' ', '-' or '+'", i+2)
					}
				}
				i++
			}
			if len(op.hunks) == 0 && op.moveTo == "" {
				return nil, fmt.Errorf("patch line %d: update of %q has no hunks", lineNo, op.path)
			}
			ops = append(ops, op)
		case strings.TrimSpace(l) == "":
			i++
		default:
			return nil, fmt.Errorf("patch line %d: expected \"*** Add File:\", \"*** Delete File:\" or \"*** Update File:\", got %q", lineNo, truncate(l, 80))
		}
	}
	if len(ops) == 0 {
		return nil, errors.New("the patch changes no file")
	}
	return ops, nil
}

// findLines returns where want starts in lines at or after from, or -1.
func findLines(lines, want []string, from int, atEOF bool) int {
	norms := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	}
	for _, norm := range norms {
		start, end := from, len(lines)-len(want)
		if atEOF {
			start = max(end, from)
		}
	next:
		for i := start; i <= end; i++ {
			for j, w := range want {
				if norm(lines[i+j]) != norm(w) {
					continue next
				}
			}
			return i
		}
	}
	return -1
}

func applyHunks(path, content string, hunks []patchHunk) (string, error) {
	trailingNL := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if content == "" {
		lines = nil
	}
	cursor := 0
	for n, h := range hunks {
		anchorAt := -1
		if h.anchor != "" {
			anchorAt = findLines(lines, []string{h.anchor}, cursor, false)
			if anchorAt < 0 {
				return "", fmt.Errorf("%s: hunk %d: anchor line %q not found", path, n+1, h.anchor)
			}
			cursor = anchorAt + 1
		}
		at := len(lines)
		if len(h.old) > 0 || !h.eof {
			at = findLines(lines, h.old, cursor, h.eof)
			if at < 0 && anchorAt >= 0 { // the hunk repeated its anchor line as context
				at = findLines(lines, h.old, anchorAt, h.eof)
			}
		}
		if at < 0 {
			return "", fmt.Errorf("%s: hunk %d: these lines were not found (read the file again):\n%s",
				path, n+1, truncate(strings.Join(h.old, "\n"), 2000))
		}
		lines = append(lines[:at], append(append([]string(nil), h.new...), lines[at+len(h.old):]...)...)
		cursor = at + len(h.new)
	}
	out := strings.Join(lines, "\n")
	if trailingNL || out != "" {
		out += "\n"
	}
	return out, nil
}

func (tb *toolbox) applyPatch(_ context.Context, raw string) toolResult {
	var args struct {
		Patch string `json:"patch"`
	}
	if err := decodeArgs("apply_patch", raw, &args, "patch"); err != nil {
		return errResult("%v", err)
	}
	ops, err := parsePatch(args.Patch)
	if err != nil {
		return errResult("apply_patch: %v", err)
	}
	type write struct {
		path    string
		content []byte
		remove  bool
	}
	var writes []write
	var summary []string
	for _, op := range ops {
		p, err := tb.rel(op.path)
		if err != nil {
			return errResult("apply_patch: %v", err)
		}
		switch op.kind {
		case "add":
			if _, err := tb.root.Stat(p); err == nil {
				return errResult("apply_patch: %s exists already; use *** Update File", p)
			}
			writes = append(writes, write{path: p, content: []byte(strings.Join(op.lines, "\n") + "\n")})
			summary = append(summary, "A "+p)
		case "delete":
			if _, err := tb.root.Stat(p); err != nil {
				return errResult("apply_patch: delete %s: %v", p, err)
			}
			writes = append(writes, write{path: p, remove: true})
			summary = append(summary, "D "+p)
		case "update":
			b, err := tb.root.ReadFile(p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return errResult("apply_patch: update %s: no such file; use *** Add File", p)
				}
				return errResult("apply_patch: update %s: %v", p, err)
			}
			out, err := applyHunks(p, string(b), op.hunks)
			if err != nil {
				return errResult("apply_patch: %v", err)
			}
			dst := p
			if op.moveTo != "" {
				if dst, err = tb.rel(op.moveTo); err != nil {
					return errResult("apply_patch: move to: %v", err)
				}
				writes = append(writes, write{path: p, remove: true})
			}
			writes = append(writes, write{path: dst, content: []byte(out)})
			summary = append(summary, "M "+dst)
		}
	}
	for _, w := range writes {
		if w.remove {
			err = tb.root.Remove(w.path)
		} else {
			err = tb.write(w.path, w.content)
		}
		if err != nil {
			return errResult("apply_patch: %s: %v (earlier files of this patch were written)", w.path, err)
		}
	}
	return toolResult{out: "applied patch:\n" + strings.Join(summary, "\n")}
}
