package workitems

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RepoKey is a repository's identity whatever its spelling (case, ".git", a trailing slash):
// one fleet lists a repository once, and its items' ids and the fleet view agree on it.
func RepoKey(repo string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimRight(repo, "/"), ".git"))
}

// FleetItemID is the deterministic id of one repository's item of a fleet tick:
// <template>@<tick>-<name>-<8 hex digits of a hash of the repository>. Every scheduler
// replica makes the same id, so a tick makes each repository's item once.
func FleetItemID(template string, tick time.Time, repo string) string {
	name := repo
	if slug, err := RepoSlugFromURL(repo); err == nil {
		_, name, _ = strings.Cut(slug, "/")
	} else {
		name = strings.TrimSuffix(strings.TrimRight(name, "/"), ".git")
		name = name[strings.LastIndexAny(name, "/\\:")+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '.' || r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	h := sha256.Sum256([]byte(RepoKey(repo)))
	return CronItemID(template, tick) + "-" + name + "-" + hex.EncodeToString(h[:4])
}

// CheckTriggerItemID is the deterministic id of the item a check_failed trigger makes for a
// commit: one per (template, forge, repository, commit), so a second failing check on the
// same commit, a delivery replayed, or another replica handling the same delivery makes none.
// It reads <template>@check-<sha, 12 digits>-<8 hex digits of a hash of forge, repo and sha>.
func CheckTriggerItemID(template, forge, repo, sha string) string {
	return template + "@check-" + shortSHA(sha) + "-" + triggerHash(forge, repo, strings.ToLower(sha))
}

// LabelTriggerItemID is the deterministic id of the item a labeled trigger makes: one per
// (template, forge, repository, issue or pull request number, label).
// It reads <template>@label-<number>-<8 hex digits of a hash of forge, repo, number and label>.
func LabelTriggerItemID(template, forge, repo string, number int, label string) string {
	n := strconv.Itoa(number)
	return template + "@label-" + n + "-" + triggerHash(forge, repo, n, label)
}

// triggerHash hashes a trigger's identifying facts; the repository case-insensitively.
func triggerHash(forge, repo string, rest ...string) string {
	h := sha256.New()
	for _, s := range append([]string{forge, strings.ToLower(repo)}, rest...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

func shortSHA(sha string) string {
	sha = strings.ToLower(sha)
	if len(sha) > 12 {
		sha = sha[:12]
	}
	var b strings.Builder
	for _, r := range sha {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// APITriggerItemID is the deterministic id of the item a call of a template's trigger endpoint
// with an idempotency key makes: one per (template, key). The key is the caller's text, so it
// is hashed: <template>@api-<16 hex digits>.
func APITriggerItemID(template, key string) string {
	h := sha256.Sum256([]byte(template + "\x00" + key))
	return template + "@api-" + hex.EncodeToString(h[:8])
}

// AlertTriggerItemID is the deterministic id of the item an alertmanager trigger makes: one
// per (template, receiver, group key, set of firing alerts). firing are the group's firing
// alerts as fingerprint and start time (any order); a repeat notification of the same alerts
// names the same item, an alert joining or firing anew names another. It reads
// <template>@alert-<12 hex digits of a hash of receiver, group key and firing>.
func AlertTriggerItemID(template, receiver, groupKey string, firing []string) string {
	f := slices.Clone(firing)
	slices.Sort(f)
	h := sha256.New()
	for _, s := range append([]string{receiver, groupKey}, f...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return template + "@alert-" + hex.EncodeToString(h.Sum(nil))[:12]
}
