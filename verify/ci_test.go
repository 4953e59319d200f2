package verify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestEvidenceHandler(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	store := NewRedisCIStore(env.Client, env.Prefix, time.Hour, nil)
	srv := httptest.NewServer(EvidenceHandler(store, "hook-token"))
	t.Cleanup(srv.Close)
	post := func(t *testing.T, method, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/api/evidence", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		msg, _ := m["error"].(string)
		return resp.StatusCode, msg
	}
	keyExists := func(t *testing.T, sha string) bool {
		n, err := env.Client.Exists(context.Background(), ciKey(env.Prefix, "acme/pay", sha)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	t.Run("a valid post is stored and read back per name, latest wins", func(t *testing.T) {
		body := `{"repo":"acme/pay","sha":"` + strings.ToUpper(shaA) + `","checks":[{"name":"build","state":"failed"},{"name":"test","state":"running","url":"https://ci.example/1"}]}`
		if code, msg := post(t, "POST", "hook-token", body); code != http.StatusAccepted {
			t.Fatalf("code %d %s", code, msg)
		}
		body = `{"repo":"acme/pay","sha":"` + shaA + `","checks":[{"name":"build","state":"passed","details":"ok"}]}`
		if code, msg := post(t, "POST", "hook-token", body); code != http.StatusAccepted {
			t.Fatalf("code %d %s", code, msg)
		}
		checks, err := store.Checks(context.Background(), "acme/pay", shaA)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]CIState{}
		for _, c := range checks {
			got[c.Name] = c.State
			if c.SHA != shaA {
				t.Errorf("sha %s", c.SHA)
			}
		}
		if got["build"] != CISuccess || got["test"] != CIPending || len(got) != 2 {
			t.Fatalf("stored %v", got)
		}
		ttl := env.Client.PTTL(context.Background(), ciKey(env.Prefix, "acme/pay", shaA)).Val()
		if ttl <= 0 || ttl > time.Hour {
			t.Fatalf("ttl %v", ttl)
		}
	})

	bad := []struct {
		name, method, token, body string
		code                      int
		msg                       string
	}{
		{"a wrong token is refused", "POST", "nope", `{}`, 401, "bearer token"},
		{"a missing token is refused", "POST", "", `{}`, 401, "bearer token"},
		{"GET is not allowed", "GET", "hook-token", ``, 405, "POST"},
		{"malformed JSON is a 400", "POST", "hook-token", `{"repo":`, 400, "not an evidence payload"},
		{"unknown fields are a 400", "POST", "hook-token", `{"repo":"acme/pay","sha":"` + shaB + `","checks":[],"extra":1}`, 400, "unknown field"},
		{"a bad repo is a 400", "POST", "hook-token", `{"repo":"nope","sha":"` + shaB + `","checks":[{"name":"a","state":"success"}]}`, 400, "repo"},
		{"a short sha is a 400", "POST", "hook-token", `{"repo":"acme/pay","sha":"abc1234","checks":[{"name":"a","state":"success"}]}`, 400, "full commit SHA"},
		{"no checks is a 400", "POST", "hook-token", `{"repo":"acme/pay","sha":"` + shaB + `","checks":[]}`, 400, "at least one"},
		{"an unknown state is a 400 and nothing is stored", "POST", "hook-token", `{"repo":"acme/pay","sha":"` + shaB + `","checks":[{"name":"a","state":"success"},{"name":"b","state":"green-ish"}]}`, 400, "checks[1].state"},
		{"a non-http url is a 400", "POST", "hook-token", `{"repo":"acme/pay","sha":"` + shaB + `","checks":[{"name":"a","state":"success","url":"javascript:alert(1)"}]}`, 400, "url"},
		{"trailing data is a 400", "POST", "hook-token", `{"repo":"acme/pay","sha":"` + shaB + `","checks":[{"name":"a","state":"success"}]} {}`, 400, "after the JSON"},
		{"a body over the limit is a 413", "POST", "hook-token", `{"repo":"` + strings.Repeat("a", EvidenceLimit) + `"}`, 413, "larger"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			code, msg := post(t, c.method, c.token, c.body)
			if code != c.code || !strings.Contains(msg, c.msg) {
				t.Fatalf("got %d %q, want %d containing %q", code, msg, c.code, c.msg)
			}
			if keyExists(t, shaB) {
				t.Fatal("something was stored")
			}
		})
	}
}

// scriptedCI returns the next set of checks on each call (the last one repeats).
type scriptedCI struct {
	mu      sync.Mutex
	steps   [][]CICheck
	calls   int
	reruns  []string
	onRerun func()
}

func (s *scriptedCI) Checks(ctx context.Context, repo, sha string) ([]CICheck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.steps)-1)
	s.calls++
	out := []CICheck{}
	for _, c := range s.steps[i] {
		if c.SHA == "" {
			c.SHA = sha
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *scriptedCI) Rerun(ctx context.Context, repo, sha string, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reruns = append(s.reruns, names...)
	if s.onRerun != nil {
		s.onRerun()
	}
	return nil
}

// ciVerifier returns a verifier whose clock only moves when it sleeps.
func ciVerifier(src CISource) (*Verifier, *[]time.Duration) {
	clock := fakeclock.New(testNow)
	var mu sync.Mutex
	var slept []time.Duration
	v := New(WithClock(clock),
		WithCI("webhook", src),
		WithSleeper(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			clock.Advance(d)
			slept = append(slept, d)
			return nil
		}, 30*time.Second))
	return v, &slept
}

func ciTemplate() *config.Template {
	tmpl := template()
	tmpl.DoneCheck.CI = &config.CICheck{Provider: "webhook", Repo: "acme/pay", Required: []string{"build", "test"},
		Wait: workitems.Duration(5 * time.Minute)}
	return tmpl
}

func TestVerifyWithCI(t *testing.T) {
	t.Parallel()
	ok := func(name string) CICheck { return CICheck{Name: name, State: CISuccess} }
	st := func(name string, s CIState) CICheck { return CICheck{Name: name, State: s} }
	cases := []struct {
		name    string
		steps   [][]CICheck
		outcome workitems.Outcome
		rule    workitems.RuleName
		waited  time.Duration
	}{
		{"required checks that turn green while we wait close the item",
			[][]CICheck{{ok("build")}, {ok("build"), st("test", CIPending)}, {ok("build"), ok("test")}},
			workitems.OutcomeClose, "checks_passed", time.Minute},
		{"a required check still pending at the deadline escalates",
			[][]CICheck{{ok("build"), st("test", CIPending)}}, workitems.OutcomeEscalate, "ci_missing", 5 * time.Minute},
		{"evidence for another commit does not count",
			[][]CICheck{{ok("build"), {Name: "test", State: CISuccess, SHA: shaB}}}, workitems.OutcomeEscalate, "ci_missing", 5 * time.Minute},
		{"a failed required check retries",
			[][]CICheck{{ok("build"), st("test", CIFailure)}}, workitems.OutcomeRetry, "ci_failed", 0},
		{"action_required escalates",
			[][]CICheck{{ok("build"), st("test", CIActionRequired)}}, workitems.OutcomeEscalate, "ci_action_required", 0},
		{"an infra error that persists after the re-runs escalates",
			[][]CICheck{{ok("build"), st("test", CIInfraError)}}, workitems.OutcomeEscalate, "infra_error", 0},
		{"an infra error that a re-run fixes closes",
			[][]CICheck{{ok("build"), st("test", CICancelled)}, {ok("build"), ok("test")}}, workitems.OutcomeClose, "checks_passed", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := gitRepo(t, map[string]string{"a.txt": "a\n"})
			src := &scriptedCI{steps: c.steps}
			v, slept := ciVerifier(src)
			res, err := v.Verify(context.Background(), Request{Template: ciTemplate(), Item: item(workitems.Attempt{N: 1}),
				Attempt: 1, Exit: completed(), Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision.Outcome != c.outcome || res.Decision.Rule != c.rule {
				t.Fatalf("got %s/%s %v", res.Decision.Outcome, res.Decision.Rule, res.Decision.Reasons)
			}
			var total time.Duration
			for _, d := range *slept {
				total += d
			}
			if total != c.waited {
				t.Fatalf("waited %v (%v), want %v", total, *slept, c.waited)
			}
			if c.rule == "infra_error" && len(src.reruns) != 1 {
				t.Fatalf("re-runs %v, want one (InfraRetries 1)", src.reruns)
			}
		})
	}
}
