package shorten_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"outerloop/lib/shorten"
)

func TestShortening(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, got, want string }{
		{"short sha", shorten.SHA("0123456789abcdef0123"), "0123456789ab"},
		{"short sha of a short id", shorten.SHA("abc"), "abc"},
		{"clip within", shorten.Clip("hello", 5), "hello"},
		{"clip", shorten.Clip("hello world", 5), "hello…"},
		{"clip at a character boundary", shorten.Clip("añb", 2), "a…"},
		{"one line", shorten.OneLine("  a\n\tb  c \n", 0), "a b c"},
		{"one line clipped", shorten.OneLine("a\nbcdef", 3), "a b…"},
		{"first line", shorten.FirstLine("\n  \n  first \nsecond"), "first"},
		{"no first line", shorten.FirstLine(" \n\t"), ""},
		{"last line", shorten.LastLine("one\ntwo \n\n"), "two"},
		{"last line of one", shorten.LastLine(" only "), "only"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	for n := range 8 {
		if s := shorten.Clip("ééééé", n); !utf8.ValidString(s) {
			t.Errorf("Clip(_, %d) = %q is not valid UTF-8", n, s)
		}
	}
}

func TestClipMarkedStaysWithinItsBoundAndSaysItCut(t *testing.T) {
	if got := shorten.ClipMarked("short", 10); got != "short" {
		t.Errorf("a short text changed: %q", got)
	}
	got := shorten.ClipMarked(strings.Repeat("é", 40), 30) // 2 bytes a character
	if len(got) > 30 || !strings.HasSuffix(got, "\n[… clipped]") || !utf8.ValidString(got) {
		t.Errorf("ClipMarked = %q (%d bytes)", got, len(got))
	}
	if got := shorten.ClipMarked("abcdef", 3); got != "\n[… clipped]" {
		t.Errorf("a bound below the mark: %q", got)
	}
}
