package verify

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"

	"github.com/redis/go-redis/v9"
)

// Bounds on the evidence files kept per attempt: a file beyond MaxEvidenceFileBytes is kept cut
// (Truncated, so its replay reads an incomplete report, which never closes); files beyond the
// count or the attempt's total are listed as dropped and not kept.
const (
	MaxEvidenceFiles        = 32
	MaxEvidenceFileBytes    = 1 << 20
	MaxEvidenceAttemptBytes = 4 << 20
)

// ReplayManifest is the name of the file that says how to replay a decision from the others.
const ReplayManifest = "replay.json"

// EvidenceFile is one file a decision used, kept so an operator can rerun the decision offline
// with `outerloop verify` (see Replay).
type EvidenceFile struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"` // bytes of the original
	Truncated bool   `json:"truncated,omitempty"`
	Data      []byte `json:"-"`
}

// Replay is the manifest (replay.json) of an attempt's evidence files: the `outerloop verify`
// options that reproduce the decision.
type Replay struct {
	Reports  []string               `json:"reports"`                // evidence file names, in the order the verifier read them
	Format   workitems.ReportFormat `json:"format,omitempty"`       // the template's done_check.format
	ExitCode *int                   `json:"exit_code,omitempty"`    // first non-zero done-check exit code, else 0; nil without commands
	ExitName string                 `json:"exit_command,omitempty"` // the command that gave it
	ExitTail string                 `json:"exit_tail,omitempty"`    // the end of its output (redacted)
	CI       string                 `json:"ci,omitempty"`           // evidence file holding the CI checks (POST /api/evidence shape)
	Diff     string                 `json:"diff,omitempty"`         // evidence file holding the diff
	Template string                 `json:"template"`
	Missing  []string               `json:"missing,omitempty"` // expected reports that matched no file
	Module   string                 `json:"module,omitempty"`  // Go module of the workspace, relating flaky tests to the diff
	Command  string                 `json:"command"`           // the command line, for people
	Dropped  []string               `json:"dropped,omitempty"`
}

// evidenceSet gathers files under the bounds.
type evidenceSet struct {
	files   []EvidenceFile
	total   int
	dropped []string
	missing []string // expected reports that matched no file
}

func (s *evidenceSet) add(name string, r io.Reader) {
	if len(s.files) >= MaxEvidenceFiles-1 { // one place is kept for the manifest
		s.dropped = append(s.dropped, name+" (too many files)")
		return
	}
	room := min(MaxEvidenceFileBytes, MaxEvidenceAttemptBytes-s.total)
	if room <= 0 {
		s.dropped = append(s.dropped, name+" (attempt limit)")
		return
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(room)+1))
	if err != nil {
		s.dropped = append(s.dropped, name+" ("+err.Error()+")")
		return
	}
	f := EvidenceFile{Name: name, Size: int64(len(data)), Data: data}
	if len(data) > room {
		f.Data, f.Truncated = data[:room], true
		if n, err := io.Copy(io.Discard, r); err == nil {
			f.Size += n
		}
	}
	// Evidence is stored: secret-looking text goes, as it goes from every decision.
	if utf8.Valid(f.Data) {
		f.Data = []byte(proc.Redact(string(f.Data)))
	}
	s.total += len(f.Data)
	s.files = append(s.files, f)
}

func (s *evidenceSet) addFile(name, path string) {
	fh, err := os.Open(path)
	if err != nil {
		s.dropped = append(s.dropped, name+" ("+err.Error()+")")
		return
	}
	defer fh.Close()
	s.add(name, fh)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// evidenceName is a file name for a report: its index and a cleaned base name.
func evidenceName(i int, source string) string {
	base := unsafeName.ReplaceAllString(filepath.Base(source), "_")
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	return fmt.Sprintf("report-%d-%s", i+1, strings.Trim(base, "._"))
}

// finish adds the CI, diff and manifest files.
func (s *evidenceSet) finish(f *Facts, format workitems.ReportFormat, ciRepo string, patch []byte, module string) []EvidenceFile {
	rp := Replay{Format: format, Template: "cli", Missing: s.missing, Module: module}
	if f.Template != nil && f.Template.Name != "" {
		rp.Template = f.Template.Name
	}
	for _, ef := range s.files {
		rp.Reports = append(rp.Reports, ef.Name)
	}
	if len(f.Commands) > 0 {
		code := 0
		rp.ExitName = f.Commands[0].Command
		for _, c := range f.Commands {
			if !c.OK() {
				code = c.ExitCode
				if code == 0 || code < 0 {
					code = 1 // timed out or could not run: not a success
				}
				rp.ExitName, rp.ExitTail = c.Command, proc.Redact(c.Tail)
				break
			}
		}
		rp.ExitCode = &code
	}
	if f.CI != nil && f.CI.SHA != "" && len(f.CI.Checks) > 0 {
		p := EvidencePayload{Repo: ciRepo, SHA: f.CI.SHA}
		for _, c := range f.CI.Checks {
			p.Checks = append(p.Checks, EvidenceCheck{Name: c.Name, State: string(c.State), URL: c.URL, Details: shorten.Clip(c.Details, 2000)})
		}
		if b, err := json.MarshalIndent(p, "", "  "); err == nil {
			s.add("ci.json", bytes.NewReader(b))
			rp.CI = "ci.json"
		}
	}
	if patch != nil {
		s.add("diff.patch", bytes.NewReader(patch))
		rp.Diff = "diff.patch"
	}
	args := []string{"outerloop", "verify"}
	if rp.Template != "cli" {
		args = append(args, "--template", rp.Template)
	}
	if format != "" && format != FormatAuto {
		args = append(args, "--format", string(format))
	}
	for _, r := range rp.Reports {
		args = append(args, "--report", r)
	}
	if rp.ExitCode != nil {
		args = append(args, "--exit-code", strconv.Itoa(*rp.ExitCode))
	}
	if rp.CI != "" {
		args = append(args, "--ci", rp.CI)
	}
	if rp.Diff != "" {
		args = append(args, "--diff", rp.Diff)
	}
	rp.Command = strings.Join(args, " ")
	rp.Dropped = s.dropped
	b, _ := json.MarshalIndent(rp, "", "  ")
	s.files = append(s.files, EvidenceFile{Name: ReplayManifest, Size: int64(len(b)), Data: b})
	return s.files
}

// ReplayDir replays the decision kept in dir (an attempt's evidence files, written by name) with
// the given template (nil: the manifest's template is not loaded, the default policy decides).
func ReplayDir(ctx context.Context, w io.Writer, dir string, opt CLIOptions) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, ReplayManifest))
	if err != nil {
		return 2, fmt.Errorf("verify: replay: %w", err)
	}
	var rp Replay
	if err := json.Unmarshal(b, &rp); err != nil {
		return 2, fmt.Errorf("verify: replay: %s: %w", ReplayManifest, err)
	}
	files := make([]string, 0, len(rp.Reports))
	for _, r := range rp.Reports {
		files = append(files, filepath.Join(dir, r))
	}
	opt.Format, opt.ExitCode, opt.Missing, opt.Module = rp.Format, rp.ExitCode, rp.Missing, rp.Module
	opt.ExitName, opt.ExitTail = rp.ExitName, rp.ExitTail
	if rp.CI != "" {
		opt.CIFile = filepath.Join(dir, rp.CI)
	}
	if rp.Diff != "" {
		opt.DiffFile = filepath.Join(dir, rp.Diff)
	}
	return RunCLI(ctx, w, files, opt)
}

// diffPatch is the workspace's change against base as a patch: tracked changes and untracked
// files as new files, the evidence CollectDiff counted (bounded like any evidence file).
func diffPatch(ctx context.Context, w worktree, base string) []byte {
	out, err := w.git(ctx, "diff", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", base, "--")
	if err != nil {
		return nil
	}
	buf := bytes.NewBuffer(out)
	untracked, err := w.git(ctx, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return buf.Bytes()
	}
	for p := range bytes.SplitSeq(untracked, []byte{0}) {
		if len(p) == 0 || buf.Len() > MaxEvidenceFileBytes {
			continue
		}
		data, err := w.readFile(string(p), MaxEvidenceFileBytes+1)
		if err != nil {
			continue
		}
		fmt.Fprintf(buf, "diff --git a/%s b/%s\nnew file mode 100644\n", p, p)
		if bytes.IndexByte(data, 0) >= 0 {
			fmt.Fprintf(buf, "Binary files /dev/null and b/%s differ\n", p)
			continue
		}
		lines := strings.SplitAfter(string(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		fmt.Fprintf(buf, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", p, len(lines))
		for _, l := range lines {
			buf.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	return buf.Bytes()
}

// EvidenceFileStore keeps an attempt's evidence files.
type EvidenceFileStore interface {
	PutFiles(ctx context.Context, itemID string, attempt int, files []EvidenceFile) error
	Files(ctx context.Context, itemID string, attempt int) ([]EvidenceFile, error)
}

// RedisEvidenceStore keeps evidence files gzip-compressed in one Redis hash per attempt
// (<prefix>evidence:<item>:<attempt>; field "index" lists the files), expiring after ttl.
type RedisEvidenceStore struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewRedisEvidenceStore returns a store; ttl 0 means 30 days.
func NewRedisEvidenceStore(rdb redis.UniversalClient, prefix string, ttl time.Duration) *RedisEvidenceStore {
	if ttl <= 0 {
		ttl = 30 * 24 * time.Hour
	}
	return &RedisEvidenceStore{rdb: rdb, prefix: prefix, ttl: ttl}
}

// evidenceKey is the one place the store's key is built.
func evidenceKey(prefix, item string, attempt int) string {
	return prefix + "evidence:" + item + ":" + strconv.Itoa(attempt)
}

const indexField = "index"

// PutFiles replaces an attempt's files in one transaction.
func (s *RedisEvidenceStore) PutFiles(ctx context.Context, itemID string, attempt int, files []EvidenceFile) error {
	key := evidenceKey(s.prefix, itemID, attempt)
	vals := make([]any, 0, 2*len(files)+2)
	for _, f := range files {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(f.Data)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("verify: evidence files %s: %w", key, err)
		}
		vals = append(vals, "f:"+f.Name, buf.Bytes())
	}
	idx, err := json.Marshal(files)
	if err != nil {
		return fmt.Errorf("verify: evidence files %s: %w", key, err)
	}
	vals = append(vals, indexField, idx)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.HSet(ctx, key, vals...)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: evidence files put %s: %w", key, err)
	}
	return nil
}

// Files returns an attempt's files with their data (none: an empty list).
func (s *RedisEvidenceStore) Files(ctx context.Context, itemID string, attempt int) ([]EvidenceFile, error) {
	key := evidenceKey(s.prefix, itemID, attempt)
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("verify: evidence files get %s: %w", key, err)
	}
	var files []EvidenceFile
	if idx, ok := m[indexField]; ok {
		if err := json.Unmarshal([]byte(idx), &files); err != nil {
			return nil, fmt.Errorf("verify: evidence files %s: index: %w", key, err)
		}
	}
	for i := range files {
		zr, err := gzip.NewReader(strings.NewReader(m["f:"+files[i].Name]))
		if err != nil {
			return nil, fmt.Errorf("verify: evidence file %s %s: %w", key, files[i].Name, err)
		}
		files[i].Data, err = io.ReadAll(io.LimitReader(zr, MaxEvidenceFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("verify: evidence file %s %s: %w", key, files[i].Name, err)
		}
	}
	return files, nil
}

// EvidenceFilesHandler serves GET /api/items/{id}/attempts/{n}/evidence (the list, JSON) and
// GET /api/items/{id}/attempts/{n}/evidence/{name} (one file, as bytes).
func EvidenceFilesHandler(store EvidenceFileStore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 1 || id == "" {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("attempt %q: want a number from 1", r.PathValue("n")))
			return
		}
		files, err := store.Files(r.Context(), id, n)
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		name := r.PathValue("name")
		if name == "" {
			if files == nil {
				files = []EvidenceFile{}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"item": id, "attempt": n, "files": files})
			return
		}
		i := slices.IndexFunc(files, func(f EvidenceFile) bool { return f.Name == name })
		if i < 0 {
			httpError(w, http.StatusNotFound, fmt.Sprintf("item %s attempt %d has no evidence file %q", id, n, name))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", "attachment; filename=\""+files[i].Name+"\"")
		h.Set("X-Content-Type-Options", "nosniff")
		if files[i].Truncated {
			h.Set("X-Outerloop-Truncated", fmt.Sprintf("%d of %d bytes", len(files[i].Data), files[i].Size))
		}
		_, _ = w.Write(files[i].Data)
	})
}
