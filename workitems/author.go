package workitems

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// DefaultAuthor is the author and committer of delivery commits unless deliver.author is set.
const DefaultAuthor = "outerloop <outerloop@localhost>"

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
