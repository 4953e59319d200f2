package benchmark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// RepoSpec describes the repository the workspace benchmarks generate: real Go source from
// GOROOT as the checkout, and a history much larger than it, as in long-lived projects.
type RepoSpec struct {
	GoDirs     []string // directories of $GOROOT/src copied in the first commit
	Commits    int      // commits after the first; each edits Go files and replaces a data file
	NoiseBytes int      // size of the (incompressible) data file each commit writes and the next deletes
	EditFiles  int      // Go files each commit edits
}

// DefaultRepo is what `outerloop bench` measures on: about 2,300 files and 28 MB of Go code
// checked out, with a history of about 100 MB.
var DefaultRepo = RepoSpec{GoDirs: []string{"net", "crypto", "go", "encoding"}, Commits: 40, NoiseBytes: 2 << 20, EditFiles: 200}

// SmallRepo is what the Go benchmarks and tests generate (a few seconds).
var SmallRepo = RepoSpec{GoDirs: []string{"encoding"}, Commits: 10, NoiseBytes: 256 << 10, EditFiles: 20}

// GenerateRepo writes the repository into dir (a non-bare git repository on branch main) with
// git fast-import, which is far quicker than committing through a working tree.
func GenerateRepo(ctx context.Context, dir string, spec RepoSpec) error {
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("benchmark: git init: %v: %s", err, out)
	}
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("benchmark: go env GOROOT: %w", err)
	}
	root := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	var files []string
	for _, d := range spec.GoDirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("benchmark: GOROOT source: %w", err)
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("benchmark: no files under %s for %v", root, spec.GoDirs)
	}
	cmd := exec.CommandContext(ctx, "git", "fast-import", "--quiet")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	data := func(b []byte) { fmt.Fprintf(w, "data %d\n", len(b)); w.Write(b); w.WriteString("\n") }
	rnd := rand.New(rand.NewPCG(1, 2))
	when := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	contents := map[string][]byte{}
	for c := 0; c <= spec.Commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n", when.Add(time.Duration(c)*time.Hour).Unix())
		data([]byte(fmt.Sprintf("commit %d", c)))
		if c == 0 {
			for _, p := range files {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				contents[rel] = b
				fmt.Fprintf(w, "M 644 inline %s\n", rel)
				data(b)
			}
		} else {
			keys := slices.Sorted(maps.Keys(contents))
			for range spec.EditFiles {
				rel := keys[rnd.IntN(len(keys))]
				contents[rel] = append(contents[rel], fmt.Sprintf("\n// edit %d: %x\n", c, rnd.Uint64())...)
				fmt.Fprintf(w, "M 644 inline %s\n", rel)
				data(contents[rel])
			}
			fmt.Fprintf(w, "D data/blob-%d.txt\n", c-1)
		}
		noise := make([]byte, spec.NoiseBytes*3/4)
		for i := range noise {
			noise[i] = byte(rnd.Uint32())
		}
		fmt.Fprintf(w, "M 644 inline data/blob-%d.txt\n", c)
		data([]byte(base64.StdEncoding.EncodeToString(noise)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("benchmark: git fast-import: %v: %s", err, stderr.String())
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", dir, "reset", "-q", "--hard", "main").CombinedOutput(); err != nil {
		return fmt.Errorf("benchmark: checkout: %v: %s", err, out)
	}
	return nil
}

// WorkspaceResult compares ways of making an attempt's working copy from the same repository.
type WorkspaceResult struct {
	Name     string
	PerOp    time.Duration // median time to make one
	Disk     int64         // disk one takes (the working copy and what git keeps for it)
	Baseline bool
}

// WorkspaceFigures are the repository and the measurements.
type WorkspaceFigures struct {
	Source                   string // the generated repository
	Files                    int
	CheckoutBytes, RepoBytes int64 // the source's working tree and its .git
	MirrorBytes              int64
	Results                  []WorkspaceResult
}

// Workspaces measures, interleaved n times on the same generated repository and mirror:
// Workspaces.Prepare (fetch the mirror, pin the base, clone --shared, check out), `git worktree
// add` from the same mirror (the baseline), and `git clone --no-hardlinks` (what each attempt
// did before mirrors).
func Workspaces(ctx context.Context, dir string, spec RepoSpec, n int, progress io.Writer) (WorkspaceFigures, error) {
	var f WorkspaceFigures
	src := filepath.Join(dir, "source")
	f.Source = src
	fmt.Fprintf(progress, "  generating a repository from GOROOT/src/%s with %d more commits…\n", strings.Join(spec.GoDirs, ","), spec.Commits)
	if err := GenerateRepo(ctx, src, spec); err != nil {
		return f, err
	}
	f.RepoBytes = diskUsage(filepath.Join(src, ".git"))
	f.CheckoutBytes = diskUsage(src) - f.RepoBytes
	out, _ := exec.CommandContext(ctx, "git", "-C", src, "ls-files").Output()
	f.Files = len(strings.Fields(string(out)))
	ws := &worker.Workspaces{Root: filepath.Join(dir, "work"), Deployment: "bench"}
	first, err := ws.Prepare(ctx, "bench@0", 0, src) // makes the mirror; not measured
	if err != nil {
		return f, err
	}
	mirror := filepath.Join(ws.Root, "mirrors", first.Base.Mirror+".git")
	f.MirrorBytes = diskUsage(mirror)
	commit := first.Base.Commit

	type way struct {
		name     string
		baseline bool
		make     func(i int) (time.Duration, int64, error)
		times    []time.Duration
		disk     int64
	}
	ways := []*way{
		{name: "outerloop workspace (mirror fetch + clone --shared)", make: func(i int) (time.Duration, int64, error) {
			start := wall.Now()
			w, err := ws.Prepare(ctx, "bench@1", i, src)
			d := wall.Now().Sub(start)
			if err != nil {
				return 0, 0, err
			}
			return d, diskUsage(w.Dir) + diskUsage(w.Dir+".index") + diskUsage(w.GitDir()), nil
		}},
		{name: "git worktree add (same mirror)", baseline: true, make: func(i int) (time.Duration, int64, error) {
			p := filepath.Join(dir, "worktrees", fmt.Sprint(i))
			start := wall.Now()
			if out, err := exec.CommandContext(ctx, "git", "-C", mirror, "worktree", "add", "-q", "--detach", p, commit).CombinedOutput(); err != nil {
				return 0, 0, fmt.Errorf("worktree add: %v: %s", err, out)
			}
			d := wall.Now().Sub(start)
			return d, diskUsage(p) + diskUsage(filepath.Join(mirror, "worktrees", fmt.Sprint(i))), nil
		}},
		{name: "git clone --no-hardlinks (before mirrors)", make: func(i int) (time.Duration, int64, error) {
			p := filepath.Join(dir, "clones", fmt.Sprint(i))
			start := wall.Now()
			if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--no-hardlinks", src, p).CombinedOutput(); err != nil {
				return 0, 0, fmt.Errorf("clone: %v: %s", err, out)
			}
			d := wall.Now().Sub(start)
			return d, diskUsage(p), nil
		}},
	}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(progress, "  round %d of %d…\n", i, n)
		for _, w := range ways {
			d, disk, err := w.make(i)
			if err != nil {
				return f, fmt.Errorf("%s: %w", w.name, err)
			}
			w.times, w.disk = append(w.times, d), disk
		}
	}
	for _, w := range ways {
		slices.Sort(w.times)
		f.Results = append(f.Results, WorkspaceResult{Name: w.name, PerOp: w.times[len(w.times)/2], Disk: w.disk, Baseline: w.baseline})
	}
	return f, nil
}

// PrepareWorkspace times Workspaces.Prepare of a new attempt on a generated repository whose
// mirror exists (the mirror fetch, base ref, clone --shared and checkout).
func PrepareWorkspace(b *testing.B, src string) {
	ctx := context.Background()
	ws := &worker.Workspaces{Root: b.TempDir(), Deployment: "bench"}
	if _, err := ws.Prepare(ctx, "bench@0", 0, src); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := ws.Prepare(ctx, "bench@1", i, src); err != nil {
			b.Fatal(err)
		}
	}
}

// WorktreeAdd times `git worktree add` from the same kind of mirror, the baseline of
// PrepareWorkspace.
func WorktreeAdd(b *testing.B, src string) {
	ctx := context.Background()
	ws := &worker.Workspaces{Root: b.TempDir(), Deployment: "bench"}
	first, err := ws.Prepare(ctx, "bench@0", 0, src)
	if err != nil {
		b.Fatal(err)
	}
	mirror := filepath.Join(ws.Root, "mirrors", first.Base.Mirror+".git")
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if out, err := exec.Command("git", "-C", mirror, "worktree", "add", "-q", "--detach", filepath.Join(dir, fmt.Sprint(i)), first.Base.Commit).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// CheckpointSnapshot times a fenced checkpoint write that carries a workspace snapshot: with
// changed, every write follows a change to one file (tree, diff and its write); without, the
// tree is unchanged (the snapshot is the tree id only, no diff written). CheckpointWrite is the
// same write without any snapshot.
func CheckpointSnapshot(b *testing.B, e Env, src string, changed bool) {
	ctx := context.Background()
	store := itemstore.NewStore(e.Redis, e.Prefix)
	id := fmt.Sprintf("bench-snap-%d", wall.Now().UnixNano())
	if err := store.Create(ctx, &workitems.Item{ID: id, Template: "bench"}, itemstore.CreateLimits{}); err != nil {
		b.Fatal(err)
	}
	f, err := store.AcquireLease(ctx, id, 1, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ws, err := (&worker.Workspaces{Root: b.TempDir(), Deployment: "bench"}).Prepare(ctx, id, 1, src)
	if err != nil {
		b.Fatal(err)
	}
	m := worker.NewMeter(workitems.Budget{}, workitems.Spend{}, nil)
	cp := worker.NewWorkspaceCheckpointer(store, f, m, nil, ws, 0)
	state, entry := make([]byte, 500), make([]byte, 100)
	target := filepath.Join(ws.Dir, "edited-by-the-loop.txt")
	i := 0
	for b.Loop() {
		if changed {
			i++
			if err := os.WriteFile(target, fmt.Appendf(nil, "step %d\n", i), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if err := cp.Save(ctx, state, entry); err != nil {
			b.Fatal(err)
		}
	}
}

// diskUsage is the disk a tree takes (allocated blocks; hard links once).
func diskUsage(root string) int64 {
	var total int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if st.Nlink > 1 && !fi.IsDir() {
				if seen[st.Ino] {
					return nil
				}
				seen[st.Ino] = true
			}
			total += st.Blocks * 512
			return nil
		}
		total += fi.Size()
		return nil
	})
	return total
}
