// Package shorten is the one set of helpers that shorten text for messages, events and logs: a
// commit id to its short form, a string to a byte budget, to one line, to its first or last
// line. Every cut falls on a character boundary and is marked with "…".
package shorten

import (
	"strings"
	"unicode/utf8"
)

// SHA is a commit id's first 12 characters (the id itself when shorter).
func SHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Clip cuts s to at most n bytes, at a character boundary, and appends "…" when it cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// clippedMark ends a text ClipMarked cut.
const clippedMark = "\n[… clipped]"

// ClipMarked cuts s to at most n bytes in all, at a character boundary, ending what it cut
// with a line saying so: for a text a reader (a person, a model) should know is not whole. An
// n shorter than that line gives the line alone.
func ClipMarked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(clippedMark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + clippedMark
}

// OneLine is s with every run of white space (line ends included) made one space and the ends
// trimmed, then clipped to n bytes (Clip); n <= 0 does not clip.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n <= 0 {
		return s
	}
	return Clip(s, n)
}

// FirstLine is s's first line that is not blank, trimmed ("" when there is none).
func FirstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

// LastLine is the last line of s once s's surrounding white space is trimmed (so the last line
// with text, unless a blank line precedes it).
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
