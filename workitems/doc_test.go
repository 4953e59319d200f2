package workitems

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestThePackageDocDrawsTheMachine: the edges doc.go draws (`from | from ─op─► to | to`, one or
// two to a line, "any open state" for every open one) are exactly machine's state-changing
// edges, each with its operation.
func TestThePackageDocDrawsTheMachine(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	states := func(list string) []State {
		list = strings.TrimSpace(list)
		if list == "any open state" {
			return slices.DeleteFunc(AllStates(), func(s State) bool { return !s.Open() })
		}
		var out []State
		for _, f := range strings.Split(list, "|") {
			out = append(out, State(strings.TrimSpace(f)))
		}
		return out
	}
	edge := regexp.MustCompile(`^(.+?) ─([a-z_]+)─► ([a-z_| ]+)$`)
	drawn := map[Edge]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		line, _, _ = strings.Cut(line, "(")
		for _, part := range strings.Split(line, ";") {
			// a chain a ─op─► b ─op─► c is read edge by edge
			rest := strings.TrimSpace(part)
			for rest != "" {
				i := strings.Index(rest, "─►")
				if i < 0 {
					t.Fatalf("doc.go draws %q: no edge", part)
				}
				j := strings.Index(rest[i:], " ─")
				next := ""
				head := rest
				if j > 0 {
					k := strings.LastIndex(rest[:i+j], " ")
					head, next = rest[:i+j], rest[k+1:]
				}
				m := edge.FindStringSubmatch(strings.TrimSpace(head))
				if m == nil {
					t.Fatalf("doc.go draws %q: not from ─op─► to", head)
				}
				for _, from := range states(m[1]) {
					for _, to := range states(m[3]) {
						drawn[Edge{Op(m[2]), from, to}] = true
					}
				}
				rest = next
			}
		}
	}
	for _, e := range machine {
		if e.From != e.To && !drawn[e] {
			t.Errorf("doc.go does not draw %s ─%s─► %s", e.From, e.Op, e.To)
		}
		delete(drawn, e)
	}
	for e := range drawn {
		if e.From != e.To {
			t.Errorf("doc.go draws %s ─%s─► %s, which machine does not have", e.From, e.Op, e.To)
		}
	}
}
