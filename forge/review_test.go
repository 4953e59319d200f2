package forge

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReviewStatesMapFromEveryForgeString(t *testing.T) {
	t.Parallel()
	type mapped struct {
		state ReviewState
		ok    bool
	}
	gh := map[string]mapped{"APPROVED": {ReviewApproved, true}, "CHANGES_REQUESTED": {ReviewChangesRequested, true},
		"COMMENTED": {ReviewCommented, true}, "DISMISSED": {ReviewDismissed, true}, "PENDING": {"", false},
		"": {"", false}, "SOMETHING_NEW": {ReviewCommented, true}}
	gt := map[string]mapped{"APPROVED": {ReviewApproved, true}, "REQUEST_CHANGES": {ReviewChangesRequested, true},
		"COMMENT": {ReviewCommented, true}, "PENDING": {"", false}, "REQUEST_REVIEW": {"", false}, "": {"", false},
		"SOMETHING_NEW": {ReviewCommented, true}}
	seenGH, seenGT := map[ReviewState]bool{}, map[ReviewState]bool{}
	for in, want := range gh {
		t.Run("GitHub "+cmpOr(in, "(empty)")+" is "+cmpOr(string(want.state), "left out"), func(t *testing.T) {
			if s, ok := gitHubReviewState(in); s != want.state || ok != want.ok {
				t.Fatalf("got %q %v", s, ok)
			}
		})
		seenGH[want.state] = true
	}
	for in, want := range gt {
		t.Run("Gitea "+cmpOr(in, "(empty)")+" is "+cmpOr(string(want.state), "left out"), func(t *testing.T) {
			if s, ok := giteaReviewState(in, false); s != want.state || ok != want.ok {
				t.Fatalf("got %q %v", s, ok)
			}
			// Gitea's dismissed flag wins over any submitted verdict; what is not a review stays out.
			s, ok := giteaReviewState(in, true)
			if want.ok && (s != ReviewDismissed || !ok) || !want.ok && ok {
				t.Fatalf("dismissed: got %q %v", s, ok)
			}
		})
		seenGT[want.state] = true
	}
	seenGT[ReviewDismissed] = true // the flag, checked above
	for _, s := range AllReviewStates() {
		if !seenGH[s] || !seenGT[s] {
			t.Errorf("%s: not produced by GitHub (%v) or Gitea (%v)", s, seenGH[s], seenGT[s])
		}
	}
}

func TestPermissionsMapFromEveryForgeString(t *testing.T) {
	t.Parallel()
	cases := map[string]Permission{
		// Both: Gitea's AccessMode and GitHub's permission field.
		"none": PermNone, "read": PermRead, "write": PermWrite, "admin": PermAdmin,
		"owner":    PermAdmin,                     // Gitea: the repository's owner
		"maintain": PermWrite, "triage": PermRead, // GitHub's role names
		"": PermNone, "superuser": PermNone, // anything else grants nothing
	}
	seen := map[Permission]bool{}
	for in, want := range cases {
		if got := forgePermission(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
		seen[want] = true
	}
	var writers []Permission
	for _, p := range AllPermissions() {
		if !seen[p] {
			t.Errorf("%s is produced by no forge string", p)
		}
		if p.CanWrite() {
			writers = append(writers, p)
		}
	}
	if fmt.Sprint(AllPermissions()) != "[none read write admin]" || !slices.Equal(writers, []Permission{PermWrite, PermAdmin}) ||
		Permission("").CanWrite() {
		t.Fatalf("permissions %v, writers %v", AllPermissions(), writers)
	}
}

func TestClipBodyKeepsFourKiBAndSaysSo(t *testing.T) {
	t.Parallel()
	if s := strings.Repeat("a", MaxReviewBody); clipBody(s) != s {
		t.Fatal("a body of exactly the bound is kept whole")
	}
	for _, unit := range []string{"a", "é", "€", "😀"} {
		long := strings.Repeat(unit, 2*MaxReviewBody/len(unit))
		got := clipBody(long)
		kept, marker, ok := strings.Cut(got, "\n\n[outerloop: clipped, ")
		if !ok || len(kept) > MaxReviewBody || len(kept) < MaxReviewBody-3 || !utf8.ValidString(kept) ||
			marker != fmt.Sprintf("%d more bytes]", len(long)-len(kept)) {
			t.Errorf("%s: kept %d bytes, marker %q", unit, len(kept), marker)
		}
	}
}
