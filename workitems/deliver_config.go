package workitems

import (
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
)

// This file holds the template's `deliver:` section as the delivery flow reads it. The forge
// branch adds the same section (with forges:, validation of forge keys and repo defaults) to
// config.go; when both are merged, keep one Deliver type with every field below.

// DeliveryMode is what a closed item's change becomes.
type DeliveryMode string

// The delivery modes.
const (
	// DeliveryPatch keeps the patch with the item (the default without a forge).
	DeliveryPatch DeliveryMode = "patch"
	// DeliveryBranch pushes the commit to the template's branch on the forge and stops.
	DeliveryBranch DeliveryMode = "branch"
	// DeliveryPullRequest pushes and opens (or updates) the branch's pull request.
	DeliveryPullRequest DeliveryMode = "pull_request"
)

// AllDeliveryModes lists every delivery mode.
func AllDeliveryModes() []DeliveryMode {
	return []DeliveryMode{DeliveryPatch, DeliveryBranch, DeliveryPullRequest}
}

// NeedsForge reports whether the mode delivers through a forge.
func (m DeliveryMode) NeedsForge() bool { return m == DeliveryBranch || m == DeliveryPullRequest }

// DefaultAuthor is the author and committer of delivery commits unless deliver.author is set.
const DefaultAuthor = "outerloop <outerloop@localhost>"

// Deliver is a template's `deliver:` section: what a closed item's change becomes.
type Deliver struct {
	Forge       string       `yaml:"forge" json:"forge,omitempty"` // a key of forges (branch, pull_request)
	Repo        string       `yaml:"repo" json:"repo,omitempty"`   // owner/name on the forge
	Mode        DeliveryMode `yaml:"mode" json:"mode,omitempty"`   // default: patch without a forge, pull_request with one
	Base        string       `yaml:"base" json:"base,omitempty"`   // default: the remote's default branch
	Branch      string       `yaml:"branch" json:"branch,omitempty"`
	Title       string       `yaml:"title" json:"title,omitempty"` // default: the goal's first line
	Labels      []string     `yaml:"labels" json:"labels,omitempty"`
	Draft       bool         `yaml:"draft" json:"draft,omitempty"`
	Automerge   bool         `yaml:"automerge" json:"automerge,omitempty"`
	MergeMethod string       `yaml:"merge_method" json:"merge_method,omitempty"`
	// Author is "Name <email>" for the delivery commit (default DefaultAuthor).
	Author string `yaml:"author" json:"author,omitempty"`
}

func (d *Deliver) applyDefaults() {
	if d.Mode == "" {
		d.Mode = DeliveryPatch
		if d.Forge != "" {
			d.Mode = DeliveryPullRequest
		}
	}
}

// validate checks what the delivery flow relies on; the error names the field.
func (d Deliver) validate() (field string, err error) {
	if !slices.Contains(AllDeliveryModes(), d.Mode) {
		return "deliver.mode", fmt.Errorf("%q is not one of %s", d.Mode, joinModes(AllDeliveryModes()))
	}
	if d.Author != "" {
		if _, err := ParseAuthor(d.Author); err != nil {
			return "deliver.author", err
		}
	}
	return "", nil
}

// Author is a commit identity.
type Author struct {
	Name, Email string
}

// ParseAuthor reads "Name <email>"; "" gives DefaultAuthor.
func ParseAuthor(s string) (Author, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultAuthor
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" {
		return Author{}, fmt.Errorf("%q: want \"Name <email>\"", s)
	}
	if strings.ContainsAny(a.Name+a.Address, "<>\n\x00") {
		return Author{}, errors.New("name and email must not contain <, >, newlines or NUL")
	}
	return Author{Name: a.Name, Email: a.Address}, nil
}

func joinModes(ms []DeliveryMode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
