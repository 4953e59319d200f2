package vocab

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"slices"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"

	"outerloop/workitems"
)

var loaded = sync.OnceValues(func() ([]*packages.Package, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo, Dir: "../.."}
	return packages.Load(cfg, "./...")
})

// repo returns the repository's packages, without their tests, type-checked.
func repo(t *testing.T) []*packages.Package {
	t.Helper()
	pkgs, err := loaded()
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("the repository does not type-check")
	}
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages loaded", len(pkgs))
	}
	return pkgs
}

// is reports whether t is workitems' named type name.
func is(t types.Type, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "outerloop/workitems" && n.Obj().Name() == name
}

// inspect calls f with every node of every file of pkgs, and the package.
func inspect(pkgs []*packages.Package, f func(*packages.Package, ast.Node)) {
	for _, p := range pkgs {
		for _, file := range p.Syntax {
			ast.Inspect(file, func(n ast.Node) bool {
				if n != nil {
					f(p, n)
				}
				return true
			})
		}
	}
}

func stringOf(p *packages.Package, e ast.Expr) (string, bool) {
	tv, ok := p.TypesInfo.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// checkTyped fails on every constant of workitems' type name outside list ("" is the unset
// value, not one of them), and on every conversion to it of a value that is neither a constant
// nor of one of the types from (whose lists are list's too): a value of the type is always one
// of its constants.
func checkTyped(t *testing.T, pkgs []*packages.Package, name string, list []string, from ...string) {
	t.Helper()
	seen := 0
	inspect(pkgs, func(p *packages.Package, n ast.Node) {
		e, ok := n.(ast.Expr)
		if !ok {
			return
		}
		tv, ok := p.TypesInfo.Types[e]
		if !ok || !is(tv.Type, name) {
			return
		}
		pos := p.Fset.Position(e.Pos())
		if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
			at := p.TypesInfo.TypeOf(call.Args[0])
			if ftv, ok := p.TypesInfo.Types[call.Fun]; ok && ftv.IsType() && tv.Value == nil &&
				!slices.ContainsFunc(from, func(f string) bool { return is(at, f) }) {
				t.Errorf("%s: an %s converted from a value that is not a constant: use one of workitems' constants", pos, name)
			}
		}
		if tv.Value == nil {
			return
		}
		seen++
		if v := constant.StringVal(tv.Value); v != "" && !slices.Contains(list, v) {
			t.Errorf("%s: %s %q is not in workitems.All%ss", pos, name, v, name)
		}
	})
	if seen == 0 {
		t.Fatalf("no constant of type %s found: the scan is broken", name)
	}
}

func strs[T ~string](vs []T) []string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v))
	}
	return out
}

func noDuplicates(t *testing.T, what string, list []string) {
	t.Helper()
	for i, v := range list {
		if slices.Index(list, v) != i {
			t.Errorf("%s lists %q twice", what, v)
		}
	}
}

// TestEveryEventTypeIsListed: every EventType constant (and literal given as one) in the
// repository's code is in workitems.AllEventTypes.
func TestEveryEventTypeIsListed(t *testing.T) {
	t.Parallel()
	all := strs(workitems.AllEventTypes())
	noDuplicates(t, "AllEventTypes", all)
	checkTyped(t, repo(t), "EventType", all)
}

// TestEveryEventKindIsListed: every EventKind constant (and literal given as one) in the
// repository's code is in workitems.AllEventKinds, and so is every value of a "kind" entry of
// a map[string]string (an event's Data): a constant, or a conversion to string of an
// EventKind, a WaitKind or a BaseKind (whose lists AllEventKinds includes).
func TestEveryEventKindIsListed(t *testing.T) {
	t.Parallel()
	all := strs(workitems.AllEventKinds())
	noDuplicates(t, "AllEventKinds", all)
	pkgs := repo(t)
	checkTyped(t, pkgs, "EventKind", all, "WaitKind", "BaseKind")

	sites := 0
	check := func(p *packages.Package, v ast.Expr) {
		sites++
		pos := p.Fset.Position(v.Pos())
		if s, ok := stringOf(p, v); ok {
			if !slices.Contains(all, s) {
				t.Errorf("%s: event kind %q is not in workitems.AllEventKinds", pos, s)
			}
			return
		}
		if call, ok := v.(*ast.CallExpr); ok && len(call.Args) == 1 {
			if ftv := p.TypesInfo.Types[call.Fun]; ftv.IsType() {
				at := p.TypesInfo.Types[call.Args[0]].Type
				if is(at, "EventKind") || is(at, "WaitKind") || is(at, "BaseKind") {
					return
				}
			}
		}
		t.Errorf("%s: Data[\"kind\"] is neither a listed constant nor string(x) of an EventKind, WaitKind or BaseKind", pos)
	}
	isData := func(p *packages.Package, e ast.Expr) bool {
		m, ok := types.Unalias(p.TypesInfo.TypeOf(e)).Underlying().(*types.Map)
		return ok && types.Identical(m.Key(), types.Typ[types.String]) && types.Identical(m.Elem(), types.Typ[types.String])
	}
	inspect(pkgs, func(p *packages.Package, n ast.Node) {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if !isData(p, n) {
				return
			}
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := stringOf(p, kv.Key); ok && k == "kind" {
						check(p, kv.Value)
					}
				}
			}
		case *ast.AssignStmt:
			if n.Tok != token.ASSIGN {
				return
			}
			for i, l := range n.Lhs {
				ix, ok := l.(*ast.IndexExpr)
				if !ok || !isData(p, ix.X) {
					continue
				}
				if k, ok := stringOf(p, ix.Index); ok && k == "kind" && i < len(n.Rhs) {
					check(p, n.Rhs[i])
				}
			}
		}
	})
	if sites < 5 {
		t.Fatalf("only %d Data[\"kind\"] sites found: the scan is broken", sites)
	}
}
