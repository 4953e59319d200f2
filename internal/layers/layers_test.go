package layers

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The definitions this test holds the repository to:
//
//   - A package's imports are the outerloop packages its non-test Go files import (go list's
//     Imports). Test files are left out: a test may import anything, as Go itself allows.
//   - A folder at depth d is the first d elements of a package's path in the module
//     ("fleet/discover" is in folder "fleet" at depth 1 and in folder "fleet/discover" at depth 2; a
//     package shallower than d is its own folder). Every depth from 1 to the deepest package
//     is checked.
//   - An arrow F → G joins two different folders of the same depth when a package in F imports
//     a package in G.
//   - A folder's floor (layer) is 0 when it has no arrow out, else one more than the highest
//     floor its arrows reach. Floors exist only when the arrows make no cycle.
//   - An arrow points up when it reaches a floor not below its own. Over a graph with cycles
//     the count of arrows pointing up is the fewest arrows that must point up in any order of
//     the folders into floors (the minimum feedback arc set): 0 exactly when there is no
//     folder-level cycle.
//
// The test fails when any depth has an arrow pointing up, and names the cycles.

const module = "outerloop"

// knownCycles are the folder-level cycles still being removed (their folders, sorted, joined by
// a space): reported, not failed. Keep it empty.
var knownCycles = map[string]bool{}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// loadImports lists every package of the module with its outerloop imports, paths relative to
// the module.
// With tests, the imports of its test files count too.
func loadImports(t *testing.T, tests bool) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	graph := map[string][]string{}
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if p.ImportPath == module {
			rel = "."
		}
		all := p.Imports
		if tests {
			all = slices.Concat(all, p.TestImports, p.XTestImports)
		}
		var imps []string
		for _, imp := range all {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				imps = append(imps, strings.TrimPrefix(imp, module+"/"))
			}
		}
		graph[rel] = imps
	}
	return graph
}

// folderAt is p's folder at depth d.
func folderAt(p string, d int) string {
	parts := strings.Split(p, "/")
	if len(parts) > d {
		parts = parts[:d]
	}
	return path.Join(parts...)
}

// folderGraph is the arrows between folders of depth d.
func folderGraph(pkgs map[string][]string, d int) map[string]map[string]bool {
	g := map[string]map[string]bool{}
	for p, imps := range pkgs {
		f := folderAt(p, d)
		if g[f] == nil {
			g[f] = map[string]bool{}
		}
		for _, imp := range imps {
			if h := folderAt(imp, d); h != f {
				g[f][h] = true
			}
		}
	}
	return g
}

// sccs is the strongly connected components of g with more than one folder, each sorted.
func sccs(g map[string]map[string]bool) [][]string {
	var nodes []string
	for n := range g {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	index, low := map[string]int{}, map[string]int{}
	on := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		var succ []string
		for w := range g[v] {
			succ = append(succ, w)
		}
		sort.Strings(succ)
		for _, w := range succ {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				sort.Strings(comp)
				out = append(out, comp)
			}
		}
	}
	for _, n := range nodes {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	return out
}

// upward is the fewest arrows inside comp that must point up in any order of its folders
// (exact, by dynamic programming over the subsets placed on the lowest floors), with those
// arrows for one such order.
func upward(g map[string]map[string]bool, comp []string) (int, []string) {
	n := len(comp)
	if n > 24 {
		// Too many folders for the exact count: every arrow inside the cycle is counted.
		var all []string
		for _, f := range comp {
			for _, h := range comp {
				if g[f][h] {
					all = append(all, f+" → "+h)
				}
			}
		}
		return len(all), all
	}
	// out[i] is the set of folders i imports; placing i directly above the set S (the folders
	// already on lower floors) makes every arrow from a folder in S to i point up.
	in := make([]uint32, n)
	for i, f := range comp {
		for j, h := range comp {
			if g[h][f] {
				in[i] |= 1 << j // h → f: up if h is below f
			}
		}
	}
	cost := make([]int, 1<<n)
	choice := make([]int8, 1<<n)
	for s := 1; s < 1<<n; s++ {
		cost[s] = -1
		for i := range n {
			if s&(1<<i) == 0 {
				continue
			}
			rest := s &^ (1 << i)
			// i on top of rest: arrows from rest into i point up.
			c := cost[rest] + bits.OnesCount32(in[i]&uint32(rest))
			if cost[s] < 0 || c < cost[s] {
				cost[s], choice[s] = c, int8(i)
			}
		}
	}
	var order []int // lowest floor first
	for s := 1<<n - 1; s != 0; {
		i := int(choice[s])
		order = append([]int{i}, order...)
		s &^= 1 << i
	}
	pos := make([]int, n)
	for p, i := range order {
		pos[i] = p
	}
	var ups []string
	for i, f := range comp {
		for j, h := range comp {
			if g[f][h] && pos[j] > pos[i] {
				ups = append(ups, f+" → "+h)
			}
		}
	}
	sort.Strings(ups)
	return cost[1<<n-1], ups
}

// floors gives each folder of an acyclic g its floor.
func floors(g map[string]map[string]bool) map[string]int {
	fl := map[string]int{}
	var floor func(string) int
	floor = func(f string) int {
		if v, ok := fl[f]; ok {
			return v
		}
		fl[f] = 0
		v := 0
		for h := range g[f] {
			v = max(v, floor(h)+1)
		}
		fl[f] = v
		return v
	}
	for f := range g {
		floor(f)
	}
	return fl
}

func TestNoArrowPointsUp(t *testing.T) {
	pkgs := loadImports(t, false)
	depth := 1
	for p := range pkgs {
		depth = max(depth, len(strings.Split(p, "/")))
	}
	for d := 1; d <= depth; d++ {
		g := folderGraph(pkgs, d)
		total := 0
		for _, comp := range sccs(g) {
			n, ups := upward(g, comp)
			total += n
			report := t.Errorf
			if knownCycles[strings.Join(comp, " ")] {
				report = t.Logf
			}
			report("depth %d: the folders %s import each other (a cycle); %d arrows point up: %s",
				d, strings.Join(comp, ", "), n, strings.Join(ups, "; "))
		}
		arrows := 0
		for _, hs := range g {
			arrows += len(hs)
		}
		t.Logf("depth %d: %d folders, %d arrows, %d pointing up", d, len(g), arrows, total)
		if total == 0 && d == 1 {
			fl := floors(g)
			byFloor := map[int][]string{}
			top := 0
			for f, v := range fl {
				byFloor[v] = append(byFloor[v], f)
				top = max(top, v)
			}
			for v := 0; v <= top; v++ {
				slices.Sort(byFloor[v])
				t.Logf("  floor %d: %s", v, strings.Join(byFloor[v], " "))
			}
		}
	}
}

// TestTestArrows only reports (go test -v) the same measure with the imports of test files
// counted too: a package's external test may import a package that imports it, so this is
// not held at zero.
func TestTestArrows(t *testing.T) {
	pkgs := loadImports(t, true)
	g := folderGraph(pkgs, 1)
	total := 0
	for _, comp := range sccs(g) {
		n, ups := upward(g, comp)
		total += n
		t.Logf("with tests, depth 1: %d arrows point up: %s", n, strings.Join(ups, "; "))
	}
	t.Logf("with tests, depth 1: %d pointing up", total)
}

// TestUpwardCount checks the count on a small graph with a known answer.
func TestUpwardCount(t *testing.T) {
	g := map[string]map[string]bool{
		"a": {"b": true},
		"b": {"c": true},
		"c": {"a": true, "d": true},
		"d": {"c": true},
	}
	comps := sccs(g)
	if len(comps) != 1 || fmt.Sprint(comps[0]) != "[a b c d]" {
		t.Fatalf("sccs = %v", comps)
	}
	if n, ups := upward(g, comps[0]); n != 2 {
		t.Fatalf("upward = %d %v, want 2", n, ups)
	}
}
