package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"outerloop/workitems"
)

// The headers each kind of forge sends. Gitea sends its own, Gogs' and GitHub's; Forgejo its
// own and Gitea's.
var (
	signatureHeaders = map[workitems.ForgeKind][]string{
		workitems.ForgeGitHub: {"X-Hub-Signature-256"},
		workitems.ForgeGitea:  {"X-Gitea-Signature", "X-Forgejo-Signature", "X-Hub-Signature-256"},
	}
	deliveryHeaders = map[workitems.ForgeKind][]string{
		workitems.ForgeGitHub: {"X-GitHub-Delivery"},
		workitems.ForgeGitea:  {"X-Gitea-Delivery", "X-Forgejo-Delivery", "X-GitHub-Delivery"},
	}
	// eventHeaders: Gitea's X-Gitea-Event-Type is the precise event (pull_request_sync,
	// issue_label, pull_request_review_approved…); X-Gitea-Event is a coarser group.
	eventHeaders = map[workitems.ForgeKind][]string{
		workitems.ForgeGitHub: {"X-GitHub-Event"},
		workitems.ForgeGitea:  {"X-Gitea-Event-Type", "X-Forgejo-Event-Type", "X-Gitea-Event", "X-Forgejo-Event"},
	}
)

// verify reports whether one of the forge's signature headers carries the hex HMAC-SHA256 of
// body under secret ("sha256=" first in X-Hub-Signature-256). The comparison is constant-time.
func verify(kind workitems.ForgeKind, secret, body []byte, h http.Header) bool {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, name := range signatureHeaders[kind] {
		v := h.Get(name)
		if name == "X-Hub-Signature-256" {
			var found bool
			if v, found = strings.CutPrefix(v, "sha256="); !found {
				continue
			}
		}
		got, err := hex.DecodeString(strings.TrimSpace(v))
		if err != nil || len(got) != len(want) {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// delivery is what the headers say about a delivery.
type delivery struct {
	id    string // "" when the forge sent none
	event string
}

func readDelivery(kind workitems.ForgeKind, h http.Header) delivery {
	return delivery{id: firstHeader(h, deliveryHeaders[kind]), event: firstHeader(h, eventHeaders[kind])}
}

func firstHeader(h http.Header, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// parse normalises a verified payload: nil for an event or action outerloop does not use, an
// error for a payload that does not read as its event says.
func parse(kind workitems.ForgeKind, event string, body []byte) (*Event, error) {
	switch kind {
	case workitems.ForgeGitHub:
		return parseGitHub(event, body)
	case workitems.ForgeGitea:
		return parseGitea(event, body)
	}
	return nil, nil
}
