package workitems

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// constsOf reads file's string constants of type typ: name → value.
func constsOf(t *testing.T, file, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	return out
}

// ruleNameConsts reads rules.go's constants of type RuleName: name → value.
func ruleNameConsts(t *testing.T) map[string]RuleName {
	t.Helper()
	out := map[string]RuleName{}
	for n, v := range constsOf(t, "rules.go", "RuleName") {
		out[n] = RuleName(v)
	}
	return out
}

// TestEveryRuleNameConstantIsListed: AllRuleNames lists exactly the RuleName constants, so a
// constant added without listing it fails.
func TestEveryRuleNameConstantIsListed(t *testing.T) {
	t.Parallel()
	consts := ruleNameConsts(t)
	if len(consts) == 0 {
		t.Fatal("no RuleName constants found in rules.go")
	}
	for name, v := range consts {
		if !slices.Contains(AllRuleNames(), v) {
			t.Errorf("%s (%s) is not in AllRuleNames", name, v)
		}
	}
	if len(AllRuleNames()) != len(consts) {
		t.Errorf("AllRuleNames has %d names, rules.go declares %d constants", len(AllRuleNames()), len(consts))
	}
}

// TestEveryRuleNameIsDecidedWithSomewhere: every rule constant is used by production code
// outside rules.go (a row of verify's table, a guard, the store, the metrics), so a name kept
// in the list after nothing decides with it any more fails. verify's tests check the names
// against the table itself.
func TestEveryRuleNameIsDecidedWithSomewhere(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.ToSlash(rel) == "workitems/rules.go" {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		inWorkitems := f.Name.Name == "workitems"
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "workitems" {
					used[n.Sel.Name] = true
				}
			case *ast.Ident:
				if inWorkitems {
					used[n.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range ruleNameConsts(t) {
		if !used[name] {
			t.Errorf("rule %s is listed but no production code decides with it", name)
		}
	}
}

// TestARuleNameIsStoredAsAPlainString keeps the stored JSON: a decision's rule and actor are
// plain strings, and a composite name an earlier version's store recorded reads back with its base.
func TestARuleNameIsStoredAsAPlainString(t *testing.T) {
	t.Parallel()
	d := Decision{Outcome: OutcomeEscalate, Rule: "max_attempts (after tests_failed)", Actor: ActorVerifierName}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rule":"max_attempts (after tests_failed)"`) || !strings.Contains(string(b), `"actor":"verifier"`) {
		t.Errorf("stored as %s", b)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil || back.Rule.Base() != RuleMaxAttempts || back.Rule != d.Rule {
		t.Errorf("read back rule %q (base %q), err %v; want %q (base %s)", back.Rule, back.Rule.Base(), err, d.Rule, RuleMaxAttempts)
	}
	if RuleAllGreen.Base() != RuleAllGreen {
		t.Errorf("base of %s is %s", RuleAllGreen, RuleAllGreen.Base())
	}
}

// TestADecisionsKindFollowsItsActor: the verifier's and the worker's decisions are the
// system's; any other actor is a person.
func TestADecisionsKindFollowsItsActor(t *testing.T) {
	t.Parallel()
	for actor, want := range map[string]ActorKind{ActorVerifierName: ActorVerifier, ActorWorkerName: ActorVerifier, "alice": ActorPerson} {
		if got := (Decision{Actor: actor}).Kind(); got != want {
			t.Errorf("actor %q: kind %s, want %s", actor, got, want)
		}
	}
}

// TestFinalCheckStates: a check is final (a result, not something to wait for) unless it is
// pending, stale, unknown or unset.
func TestFinalCheckStates(t *testing.T) {
	t.Parallel()
	var final []CheckState
	for _, s := range AllCheckStates() {
		if s.Final() {
			final = append(final, s)
		}
	}
	want := []CheckState{CheckSuccess, CheckFailure, CheckInfraError, CheckCancelled, CheckNeutral, CheckActionRequired}
	if !slices.Equal(final, want) || CheckState("").Final() {
		t.Fatalf("final states %v, want %v", final, want)
	}
	if fmt.Sprint(AllPRStates()) != "[open closed merged]" {
		t.Fatal(AllPRStates())
	}
}

// TestEveryOriginKindIsListed: AllOriginKinds lists exactly item.go's OriginKind constants.
func TestEveryOriginKindIsListed(t *testing.T) {
	t.Parallel()
	consts := constsOf(t, "item.go", "OriginKind")
	n := len(consts)
	for name, v := range consts {
		if !slices.Contains(AllOriginKinds(), OriginKind(v)) {
			t.Errorf("%s (%s) is not in AllOriginKinds", name, v)
		}
	}
	if n == 0 || len(AllOriginKinds()) != n {
		t.Errorf("AllOriginKinds has %d kinds, item.go declares %d constants", len(AllOriginKinds()), n)
	}
	if !slices.Contains(AllOriginKinds(), OriginAPI) {
		t.Error("origin api is not listed")
	}
}
