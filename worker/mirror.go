package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"outerloop/proc"
	"outerloop/workitems"
)

// A mirror is a bare repository under <workdir>/mirrors holding the branches and tags of one
// source repository. Workspaces are made from it with `git clone --shared`, so a workspace's
// .git holds only the attempt's own objects and reads the rest through
// .git/objects/info/alternates, which names <workdir>/mirrors/<name>.git/objects: a sandbox that
// binds the workspace read-write binds that directory read-only, as the worker's own git
// directory of the workspace names it (proc.WorkspaceGitDir), never as the workspace's .git does.
//
// Its fetch refspecs cover refs/heads and refs/tags only, so `fetch --prune` never touches the
// refs/outerloop/base/… refs that pin each live workspace's base commit against gc.

// ErrBaseUnavailable means an attempt's recorded base commit cannot be made on this host: the
// mirror cannot fetch it, or the directory it was copied from changed.
var ErrBaseUnavailable = errors.New("base commit unavailable")

// MirrorName is the stable name of the mirror of a repository (a URL or an absolute path): a
// readable part from its host and path and a hash of the whole, with any credentials removed,
// so every worker on every host names the same source the same way.
func MirrorName(src string) string {
	clean := proc.RedactURL(src)
	sum := sha256.Sum256([]byte(strings.TrimSuffix(strings.TrimRight(clean, "/"), ".git")))
	readable := clean
	if u, err := url.Parse(clean); err == nil && u.Host != "" {
		readable = u.Host + u.Path
	} else if i := strings.Index(clean, ":"); i > 0 && !strings.HasPrefix(clean, "/") { // git@host:org/repo
		readable = clean[strings.Index(clean, "@")+1:]
	} else {
		parts := strings.Split(strings.Trim(clean, "/"), "/")
		readable = strings.Join(parts[max(0, len(parts)-2):], "/")
	}
	readable = safeName(strings.TrimSuffix(strings.TrimRight(readable, "/"), ".git"))
	if len(readable) > 60 {
		readable = readable[len(readable)-60:]
	}
	return strings.Trim(readable, "._-") + "-" + hex.EncodeToString(sum[:6])
}

// safeName keeps letters, digits, '.', '_' and '-' and turns everything else into '_' ('@' into
// "_at_"), for directory and ref names made from ids.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == '@':
			b.WriteString("_at_")
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] == '.' {
		out = "_" + out
	}
	return strings.ReplaceAll(out, "..", "__")
}

func (w *Workspaces) mirrorsDir() string { return filepath.Join(w.Root, "mirrors") }

func (w *Workspaces) mirrorDir(name string) string { return filepath.Join(w.mirrorsDir(), name+".git") }

// lockMirror serialises the use of one mirror: a semaphore among this process's goroutines
// (which a cancelled context leaves), then an flock on <name>.lock among processes on this host.
func (w *Workspaces) lockMirror(ctx context.Context, name string) (unlock func(), err error) {
	v, _ := w.locks.LoadOrStore(name, make(chan struct{}, 1))
	sem := v.(chan struct{})
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("worker: mirror %s: %w", name, context.Cause(ctx))
	}
	release := func() { <-sem }
	if err := os.MkdirAll(w.mirrorsDir(), 0o755); err != nil {
		release()
		return nil, fmt.Errorf("worker: mirrors: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(w.mirrorsDir(), name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		release()
		return nil, fmt.Errorf("worker: mirror lock %s: %w", name, err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		release()
		return nil, fmt.Errorf("worker: mirror lock %s: %w", name, err)
	}
	return func() {
		_ = flock(f, syscall.LOCK_UN)
		f.Close()
		release()
	}, nil
}

// flock retries when a signal (the Go runtime sends some) interrupts the call.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// mirrorBase is a base commit resolved in a mirror and pinned there by a ref.
type mirrorBase struct {
	name, dir              string
	commit, tree, branch   string
	ref                    string
	created, fetched, none bool // none: the source has no commit yet
}

// pinBase resolves an attempt's base in the mirror of src and pins it with ref, under the
// mirror's lock. With want == "" (a new attempt) the mirror is fetched and the base is the tip
// of the source's default branch; otherwise (a resume) the base is want, fetched only when the
// mirror lacks it, and ErrBaseUnavailable when the source no longer has it either.
func (w *Workspaces) pinBase(ctx context.Context, src, ref, want, at string) (mirrorBase, error) {
	m := mirrorBase{name: MirrorName(src), ref: ref}
	m.dir = w.mirrorDir(m.name)
	unlock, err := w.lockMirror(ctx, m.name)
	if err != nil {
		return m, err
	}
	defer unlock()
	m, err = w.pinBaseLocked(ctx, w.remote(src), want, at, m)
	return m, proc.RedactURLError(err, src)
}

func (w *Workspaces) pinBaseLocked(ctx context.Context, rm remote, want, at string, m mirrorBase) (mirrorBase, error) {
	var err error
	src := rm.src
	if _, err := os.Stat(filepath.Join(m.dir, "HEAD")); err != nil {
		if err := w.createMirror(ctx, rm, m.dir); err != nil {
			return m, err
		}
		m.created = true
	}
	atBranch := false
	switch {
	case want == "" && at != "":
		if !m.created {
			if err := fetchMirror(ctx, m.dir, rm); err != nil {
				return m, err
			}
			m.fetched = true
		}
		if m.commit, atBranch, err = resolveAt(ctx, rm, m.dir, at); err != nil {
			return m, err
		}
	case want == "":
		if !m.created {
			if err := fetchMirror(ctx, m.dir, rm); err != nil {
				return m, err
			}
			m.fetched = true
		}
		c, err := git(ctx, m.dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
		if err != nil {
			m.none = true // a source without commits: the workspace starts empty
			return m, nil
		}
		m.commit = c
	default:
		if !hasCommit(ctx, m.dir, want) && !m.created {
			if err := fetchMirror(ctx, m.dir, rm); err != nil {
				return m, err
			}
			m.fetched = true
		}
		if !hasCommit(ctx, m.dir, want) {
			// A server may still serve a commit no branch reaches (GitHub does); ask for it by id.
			_, _ = rm.git(ctx, m.dir, "fetch", "--quiet", src, want)
		}
		if !hasCommit(ctx, m.dir, want) {
			return m, fmt.Errorf("worker: base %.12s is not in %s any more: %w", want, proc.RedactURL(src), ErrBaseUnavailable)
		}
		m.commit = want
	}
	// One process for the tree and the branch name (--abbrev-ref applies to the args after it).
	out, err := git(ctx, m.dir, "rev-parse", m.commit+"^{tree}", "--abbrev-ref", "HEAD")
	if f := strings.Fields(out); err != nil || len(f) != 2 {
		return m, fmt.Errorf("worker: mirror %s: tree of %.12s: %q %v", m.name, m.commit, out, err)
	} else {
		m.tree, m.branch = f[0], f[1]
	}
	if m.branch == "HEAD" { // detached: the source said nothing about its default branch
		m.branch = "main"
	}
	if atBranch { // the work is on that branch: a pull request targets it
		m.branch = at
	}
	if _, err := git(ctx, m.dir, "update-ref", m.ref, m.commit); err != nil {
		return m, err
	}
	return m, nil
}

// resolveAt finds ref in a fetched mirror: a branch, then a tag, then a commit (asked of the
// server by id when no ref reaches it). branch reports the first.
func resolveAt(ctx context.Context, rm remote, dir, ref string) (commit string, branch bool, err error) {
	// An abbreviated id is found only when a fetched branch or tag reaches its commit (a
	// server is asked by full id only).
	if c, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+ref+"^{commit}"); err == nil {
		return c, true, nil
	}
	if c, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/tags/"+ref+"^{commit}"); err == nil {
		return c, false, nil
	}
	var fetchErr error
	if hexRE.MatchString(ref) {
		if !hasCommit(ctx, dir, ref) { // a full id no branch reaches: ask the server for it
			_, fetchErr = rm.git(ctx, dir, "fetch", "--quiet", rm.src, ref)
		}
		if c, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err == nil {
			return c, false, nil
		}
	}
	err = fmt.Errorf("worker: ref %q is not a branch, tag or commit of %s", ref, proc.RedactURL(rm.src))
	if fetchErr != nil { // the fetch by id failed: say why (it may be the network, not the ref)
		err = fmt.Errorf("%w (fetching it by id: %w)", err, rm.wrap(fetchErr))
		return "", false, err
	}
	return "", false, workitems.Classify(workitems.ClassNotFound, err)
}

// hexRE matches what may be a commit id, abbreviated or full (SHA-1 or SHA-256).
var hexRE = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

func hasCommit(ctx context.Context, dir, sha string) bool {
	_, err := git(ctx, dir, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// createMirror makes the bare mirror in a temporary sibling and renames it into place, so a
// crash never leaves half a mirror under the final name.
func (w *Workspaces) createMirror(ctx context.Context, rm remote, dir string) error {
	src := rm.src
	tmp, err := os.MkdirTemp(w.mirrorsDir(), ".tmp-"+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("worker: mirror: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Locked like a workspace's temporary directory, so the sweeper leaves a slow clone alone.
	lock, err := os.Open(tmp)
	if err == nil {
		err = flock(lock, syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		return fmt.Errorf("worker: mirror lock: %w", err)
	}
	defer lock.Close()
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--template="},
		// For people and tools only: fetches name the URL on the command line, so credentials in
		// a repo URL are never written into the mirror (which sandboxed commands can read).
		{"config", "remote.origin.url", proc.RedactURL(src)},
		{"config", "--add", "remote.origin.fetch", mirrorRefspecs[0]},
		{"config", "--add", "remote.origin.fetch", mirrorRefspecs[1]},
		// gc runs inside the fetch, under our lock, never detached after it.
		{"config", "gc.autoDetach", "false"},
		{"config", "core.logAllRefUpdates", "false"},
	} {
		if _, err := git(ctx, tmp, args...); err != nil {
			return err
		}
	}
	if err := fetchMirror(ctx, tmp, rm); err != nil {
		return fmt.Errorf("worker: mirror of %s: %w", proc.RedactURL(src), proc.RedactURLError(err, src))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("worker: mirror: %w", err)
	}
	return nil
}

// mirrorRefspecs are what a mirror holds: branches and tags, never refs/outerloop/… (the base
// refs live there, out of reach of --prune) nor a forge's pull-request refs.
var mirrorRefspecs = []string{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// fetchMirror fetches branches and tags (pruning those the source deleted) and points the
// mirror's HEAD at the source's default branch, with the source's credential.
func fetchMirror(ctx context.Context, dir string, rm remote) error {
	if _, err := rm.git(ctx, dir, append([]string{"fetch", "--prune", "--quiet", rm.src}, mirrorRefspecs...)...); err != nil {
		return rm.wrap(err)
	}
	out, err := rm.git(ctx, dir, "ls-remote", "--symref", rm.src, "HEAD")
	if err != nil {
		return rm.wrap(err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if target, ok := strings.CutPrefix(line, "ref: "); ok {
			ref, _, _ := strings.Cut(target, "\t")
			if cur, _ := os.ReadFile(filepath.Join(dir, "HEAD")); strings.TrimSpace(string(cur)) == "ref: "+ref {
				return nil // the usual case: no process to say so
			}
			if _, err := git(ctx, dir, "symbolic-ref", "HEAD", ref); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// unpinBase deletes a workspace's base ref from its mirror.
func (w *Workspaces) unpinBase(ctx context.Context, name, ref string) error {
	if name == "" || ref == "" {
		return nil
	}
	dir := w.mirrorDir(name)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	unlock, err := w.lockMirror(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = git(ctx, dir, "update-ref", "-d", ref)
	return err
}
