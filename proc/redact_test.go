package proc_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"outerloop/proc"
)

func TestRedactNamesTheKindAndDropsTheSecret(t *testing.T) {
	t.Parallel()
	tok := "ghp_" + strings.Repeat("a", 36)
	got := proc.Redact("push failed: token " + tok + " rejected")
	if strings.Contains(got, tok) || !strings.Contains(got, "[redacted GitHub token]") {
		t.Errorf("Redact: %q", got)
	}
	if kind := proc.SecretKind([]byte("key = AKIA" + strings.Repeat("B", 16))); kind != "AWS access key id" {
		t.Errorf("SecretKind: %q", kind)
	}
	if kind := proc.SecretKind([]byte("nothing here")); kind != "" {
		t.Errorf("SecretKind of plain text: %q", kind)
	}
}

func TestRedactURLDropsCredentialsAndKeepsPaths(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://user:tok@host/x.git?private_token=abc": "https://host/x.git",
		"http://tok@host:3000/a/b.git#frag":             "http://host:3000/a/b.git",
		"/srv/repos/x.git":                              "/srv/repos/x.git",
		"./relative":                                    "./relative",
	} {
		if got := proc.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactURLErrorHidesTheSecretAndKeepsTheChain(t *testing.T) {
	t.Parallel()
	sentinel := errors.New("exit status 128")
	for _, src := range []string{"http://user:s3cr3t-pw@h/x.git", "http://s3cr3t-tok@h/x.git"} {
		err := proc.RedactURLError(fmt.Errorf("git fetch %s: %w (s3cr3t seen)", src, sentinel), src)
		if strings.Contains(err.Error(), "s3cr3t-") || !strings.Contains(err.Error(), "http://h/x.git") {
			t.Errorf("%s: %v", src, err)
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: the chain is lost", src)
		}
	}
	plain := errors.New("x")
	if proc.RedactURLError(plain, "/local/path") != plain {
		t.Error("an error about a local path is wrapped")
	}
}
