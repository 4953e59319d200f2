package forge_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"outerloop/forge"
	"outerloop/publish"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Every forge is what each consumer asks of one: the consumers own their interfaces, forge
// imports none of them, so the check lives here.
var (
	_ publish.Forge      = forge.Forge(nil)
	_ verify.CIForge     = forge.Forge(nil)
	_ waits.ReviewForge  = forge.Forge(nil)
	_ waits.CommandForge = forge.Forge(nil)
	// A kind embedding Unsupported needs only Name and Kind to be a Forge.
	_ forge.Forge = struct {
		forge.Unsupported
		named
	}{}
)

type named struct{}

func (named) Name() string              { return "n" }
func (named) Kind() workitems.ForgeKind { return "k" }

func TestTheBuiltinKindsAreTheKindsConfigAccepts(t *testing.T) {
	t.Parallel()
	got := forge.BuiltinKinds().Names()
	want := slices.Sorted(slices.Values(workitems.AllForgeKinds()))
	if !slices.Equal(got, want) {
		t.Fatalf("built-in kinds %v, config accepts %v", got, want)
	}
	k := forge.BuiltinKinds()
	k["memory"] = nil
	if n := len(forge.BuiltinKinds()); n != len(want) {
		t.Fatalf("adding to one BuiltinKinds map changed the next: %d kinds", n)
	}
}

func TestNewBuildsARegisteredKindWithTheDefaultsAndRefusesAnUnregisteredOne(t *testing.T) {
	t.Parallel()
	var got forge.Config
	kinds := forge.BuiltinKinds()
	kinds["memory"] = func(cfg forge.Config) (forge.Forge, error) {
		got = cfg
		return struct {
			forge.Unsupported
			named
		}{Unsupported: forge.Unsupported{ForgeName: cfg.Name}}, nil
	}
	set, err := forge.NewSet(map[string]config.ForgeConfig{
		"mem": {Kind: "memory", BaseURL: "http://mem.example", TokenEnv: "MEM_TOKEN"},
		"gh":  {Kind: workitems.ForgeGitHub, BaseURL: "https://api.github.example", TokenEnv: "GH_TOKEN"},
	}, forge.Config{Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 2 || set["gh"].Kind() != workitems.ForgeGitHub {
		t.Fatalf("set %v: the built-in kind is lost when a kind is added", set)
	}
	if got.Name != "mem" || got.BaseURL != "http://mem.example" || got.Getenv == nil || got.Clock == nil || got.Logger == nil || got.HTTPClient == nil {
		t.Fatalf("the constructor got %+v: no name, entry or defaults", got)
	}

	// Without registration a kind is refused, naming the kinds there are.
	_, err = forge.NewSet(map[string]config.ForgeConfig{"mem": {Kind: "memory", BaseURL: "http://mem.example"}}, forge.Config{})
	var fe *forge.Error
	if !errors.As(err, &fe) || workitems.ClassOf(err) != workitems.ClassInvalidInput || !strings.Contains(err.Error(), `kind "memory" is not one of [gitea github]`) {
		t.Fatalf("an unregistered kind: %v", err)
	}
	// A registry without the built-ins builds only what it has.
	only := forge.Kinds{"memory": kinds["memory"]}
	if _, err := forge.New(forge.Config{Name: "gh", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub}, Kinds: only}); err == nil ||
		!strings.Contains(err.Error(), "not one of [memory]") {
		t.Fatalf("github from a registry without it: %v", err)
	}
}

func TestUnsupportedFailsEveryOperationAsInvalidInputNamingTheForge(t *testing.T) {
	t.Parallel()
	u := forge.Unsupported{ForgeName: "mem"}
	ctx := context.Background()
	calls := map[string]func() error{
		"Repository":        func() error { _, err := u.Repository(ctx, "a/b"); return err },
		"PullRequestsFor":   func() error { _, err := u.PullRequestsFor(ctx, "a/b", "x"); return err },
		"CreatePullRequest": func() error { _, err := u.CreatePullRequest(ctx, "a/b", forge.NewPullRequest{}); return err },
		"EditPullRequest":   func() error { _, err := u.EditPullRequest(ctx, "a/b", 1, forge.PullRequestEdit{}); return err },
		"ClosePullRequest":  func() error { _, err := u.ClosePullRequest(ctx, "a/b", 1); return err },
		"MarkReady":         func() error { _, err := u.MarkReady(ctx, "a/b", 1); return err },
		"AddLabels":         func() error { return u.AddLabels(ctx, "a/b", 1, nil) },
		"Comment":           func() error { return u.Comment(ctx, "a/b", 1, "") },
		"Merge":             func() error { _, err := u.Merge(ctx, "a/b", 1, forge.MergeRequest{}); return err },
		"PullRequest":       func() error { _, err := u.PullRequest(ctx, "a/b", 1); return err },
		"Reviews":           func() error { _, err := u.Reviews(ctx, "a/b", 1); return err },
		"Permission":        func() error { _, err := u.Permission(ctx, "a/b", "u"); return err },
		"Self":              func() error { _, err := u.Self(ctx); return err },
		"Checks":            func() error { _, err := u.Checks(ctx, "a/b", "s"); return err },
		"RerunChecks":       func() error { _, err := u.RerunChecks(ctx, "a/b", "s", nil); return err },
		"GitAuth":           func() error { _, err := u.GitAuth("https://x/a/b.git"); return err },
	}
	// Every method of Forge but Name and Kind is called above.
	ft := reflect.TypeFor[forge.Forge]()
	for i := range ft.NumMethod() {
		if m := ft.Method(i).Name; m != "Name" && m != "Kind" && calls[m] == nil {
			t.Errorf("Forge.%s is not checked here", m)
		}
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, forge.ErrUnsupported) || workitems.ClassOf(err) != workitems.ClassInvalidInput || !strings.HasPrefix(err.Error(), "forge mem: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
