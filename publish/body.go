package publish

import "strings"

// A pull request's body is people's too: outerloop writes only its own section, between two
// markers, and keeps whatever people wrote around it.
const (
	sectionBegin = "<!-- outerloop:begin (outerloop rewrites what is between these markers; write above or below) -->"
	sectionEnd   = "<!-- outerloop:end -->"
)

// section wraps outerloop's text in its markers.
func section(text string) string { return sectionBegin + "\n" + text + "\n" + sectionEnd }

// mergeBody is the body with outerloop's section replaced by next (a section). A body without
// the section's markers that carries the older marker alone was all outerloop's and is
// replaced; one without either (a person removed the section) keeps its text, the section
// added after it.
func mergeBody(old, next string) string {
	b := strings.Index(old, "<!-- outerloop:begin")
	if b >= 0 {
		if e := strings.Index(old[b:], sectionEnd); e >= 0 {
			return old[:b] + next + old[b+e+len(sectionEnd):]
		}
	}
	if markerRE.MatchString(old) {
		return next
	}
	if strings.TrimSpace(old) == "" {
		return next
	}
	return strings.TrimRight(old, "\n") + "\n\n" + next
}
