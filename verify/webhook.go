package verify

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// CIStore keeps CI results posted to the evidence webhook, latest per check name; it is also the
// CISource for templates whose ci.provider is "webhook".
type CIStore interface {
	CISource
	Put(ctx context.Context, repo, sha string, checks []CICheck) error
}

// EvidencePayload is the body of POST /api/evidence, for CI systems without a GitHub app
// (GitLab, Jenkins, Buildkite…):
//
//	{
//	  "repo": "acme/payments",                 // as in the template's done_check.ci.repo
//	  "sha": "3f9c2d1…",                       // full commit SHA (40 or 64 hex digits)
//	  "checks": [
//	    {"name": "test", "state": "success", "url": "https://ci.example/run/9", "details": "412 passed"}
//	  ]
//	}
//
// state is one of pending, success, failure, infra_error, cancelled, neutral, action_required,
// stale, unknown; common CI words are accepted too (passed, failed, running, canceled,
// skipped, error → infra_error). A later post for the same repo, SHA and name replaces the
// earlier one.
type EvidencePayload struct {
	Repo   string          `json:"repo"`
	SHA    string          `json:"sha"`
	Checks []EvidenceCheck `json:"checks"`
}

// EvidenceCheck is one check in an EvidencePayload.
type EvidenceCheck struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	URL     string `json:"url,omitempty"`
	Details string `json:"details,omitempty"`
}

// EvidenceLimit is the largest body EvidenceHandler accepts.
const EvidenceLimit = 1 << 20

var (
	repoRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$`)
	shaRE  = regexp.MustCompile(`^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)
)

// ParseCIState normalises a CI state word; ok is false for words it does not know.
func ParseCIState(s string) (CIState, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pending", "queued", "running", "in_progress", "created":
		return CIPending, true
	case "success", "passed", "succeeded", "ok":
		return CISuccess, true
	case "failure", "failed", "failing":
		return CIFailure, true
	case "infra_error", "error", "errored":
		return CIInfraError, true
	case "cancelled", "canceled", "aborted":
		return CICancelled, true
	case "neutral", "skipped":
		return CINeutral, true
	case "action_required", "manual":
		return CIActionRequired, true
	case "stale":
		return CIStale, true
	case "unknown":
		return CIUnknown, true
	}
	return "", false
}

// validate checks a payload and returns its checks; the error says what is wrong.
func (p EvidencePayload) validate() ([]CICheck, error) {
	if !repoRE.MatchString(p.Repo) || len(p.Repo) > 200 {
		return nil, fmt.Errorf("repo %q: want owner/name", p.Repo)
	}
	if !shaRE.MatchString(p.SHA) {
		return nil, fmt.Errorf("sha %q: want a full commit SHA (40 or 64 hex digits)", p.SHA)
	}
	if len(p.Checks) == 0 {
		return nil, errors.New("checks: at least one check is needed")
	}
	if len(p.Checks) > 500 {
		return nil, fmt.Errorf("checks: %d checks, at most 500", len(p.Checks))
	}
	out := make([]CICheck, 0, len(p.Checks))
	for i, c := range p.Checks {
		if strings.TrimSpace(c.Name) == "" || len(c.Name) > 200 {
			return nil, fmt.Errorf("checks[%d].name: missing or longer than 200", i)
		}
		st, ok := ParseCIState(c.State)
		if !ok {
			return nil, fmt.Errorf("checks[%d].state %q: not a known state (pending, success, failure, infra_error, cancelled, neutral, action_required, stale, unknown)", i, c.State)
		}
		if c.URL != "" {
			u, err := url.Parse(c.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("checks[%d].url %q: want an http(s) URL", i, c.URL)
			}
		}
		if len(c.Details) > 2000 {
			return nil, fmt.Errorf("checks[%d].details: longer than 2000", i)
		}
		out = append(out, CICheck{Name: c.Name, State: st, SHA: strings.ToLower(p.SHA), URL: c.URL, Details: c.Details})
	}
	return out, nil
}

// EvidenceHandler serves POST /api/evidence: a bearer token, an EvidencePayload; 202 with the
// number stored, or 400/401/405/413 with a message and nothing stored.
func EvidenceHandler(store CIStore, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, EvidenceLimit))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", EvidenceLimit))
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) { // the server's body deadline passed
				httpError(w, http.StatusRequestTimeout, "body not received in time")
				return
			}
			httpError(w, http.StatusBadRequest, "reading body: "+err.Error())
			return
		}
		var p EvidencePayload
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			httpError(w, http.StatusBadRequest, "body is not an evidence payload: "+err.Error())
			return
		}
		if dec.More() {
			httpError(w, http.StatusBadRequest, "body has data after the JSON object")
			return
		}
		checks, err := p.validate()
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := store.Put(r.Context(), p.Repo, strings.ToLower(p.SHA), checks); err != nil {
			httpError(w, http.StatusServiceUnavailable, "storing evidence failed")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"stored": len(checks), "repo": p.Repo, "sha": strings.ToLower(p.SHA)})
	})
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// RedisCIStore keeps webhook evidence in Redis: one hash per repo and SHA, a field per check name
// holding the check as JSON; the hash expires TTL after its last write.
type RedisCIStore struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	clock  workitems.Clock
}

// NewRedisCIStore returns a store whose keys start with prefix + "ci:". ttl 0 means 14 days;
// clock (nil: the system clock) times the stored checks.
func NewRedisCIStore(rdb redis.UniversalClient, prefix string, ttl time.Duration, clock workitems.Clock) *RedisCIStore {
	if ttl <= 0 {
		ttl = 14 * 24 * time.Hour
	}
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &RedisCIStore{rdb: rdb, prefix: prefix, ttl: ttl, clock: clock}
}

// ciKey is the one place the store's key is built: <prefix>ci:<repo>@<sha>.
func ciKey(prefix, repo, sha string) string {
	return prefix + "ci:" + repo + "@" + strings.ToLower(sha)
}

type storedCheck struct {
	State   CIState   `json:"state"`
	URL     string    `json:"url,omitempty"`
	Details string    `json:"details,omitempty"`
	At      time.Time `json:"at"`
}

// Put stores checks for repo@sha in one transaction (HSET + PEXPIRE).
func (s *RedisCIStore) Put(ctx context.Context, repo, sha string, checks []CICheck) error {
	key := ciKey(s.prefix, repo, sha)
	vals := make([]any, 0, 2*len(checks))
	for _, c := range checks {
		b, err := json.Marshal(storedCheck{State: c.State, URL: c.URL, Details: c.Details, At: s.clock.Now().UTC()})
		if err != nil {
			return fmt.Errorf("verify: ci store: %w", err)
		}
		vals = append(vals, c.Name, b)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, vals...)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: ci store put %s: %w", key, err)
	}
	return nil
}

// Checks returns the stored checks for repo@sha.
func (s *RedisCIStore) Checks(ctx context.Context, repo, sha string) ([]CICheck, error) {
	m, err := s.rdb.HGetAll(ctx, ciKey(s.prefix, repo, sha)).Result()
	if err != nil {
		return nil, fmt.Errorf("verify: ci store get: %w", err)
	}
	out := make([]CICheck, 0, len(m))
	for name, v := range m {
		var sc storedCheck
		if err := json.Unmarshal([]byte(v), &sc); err != nil {
			continue // a foreign or damaged field proves nothing
		}
		out = append(out, CICheck{Name: name, State: sc.State, SHA: strings.ToLower(sha), URL: sc.URL, Details: sc.Details})
	}
	return out, nil
}
