package hooks_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"outerloop/hooks"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestRefusals(t *testing.T) {
	t.Parallel()
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	big := bytes.Repeat([]byte("x"), 2048)
	cases := []struct {
		name     string
		method   string
		path     string
		header   http.Header
		body     []byte
		code     int
		result   hooks.Result
		observed string // the Observer's forge/kind/result; "" when not counted
		message  string
	}{
		{"AnUnknownForgeIsNotFound", http.MethodPost, "/hooks/gitlab", githubHeaders("ping", "d1", ghSecret, body), body,
			http.StatusNotFound, hooks.ResultUnknownForge, "//unknown_forge", `"gitlab" is not a key of forges`},
		{"AForgeWithoutWebhookSecretEnvIsForbidden", http.MethodPost, "/hooks/bare", giteaHeaders("status", "d1", teaSecret, body), body,
			http.StatusForbidden, hooks.ResultNotConfigured, "bare//not_configured", "set forges.bare.webhook_secret_env"},
		{"AMissingSignatureIsUnauthorized", http.MethodPost, "/hooks/gh", http.Header{"X-Github-Event": {"ping"}}, body,
			http.StatusUnauthorized, hooks.ResultBadSignature, "gh//bad_signature", "signature"},
		{"AWrongSignatureIsUnauthorized", http.MethodPost, "/hooks/gh", githubHeaders("ping", "d1", "not-the-secret", body), body,
			http.StatusUnauthorized, hooks.ResultBadSignature, "gh//bad_signature", "signature"},
		{"ASignatureWithoutItsPrefixIsUnauthorized", http.MethodPost, "/hooks/gh",
			http.Header{"X-Github-Event": {"ping"}, "X-Hub-Signature-256": {hexMAC(ghSecret, body)}}, body,
			http.StatusUnauthorized, hooks.ResultBadSignature, "gh//bad_signature", ""},
		{"AGitHubSignatureOfAnotherBodyIsUnauthorized", http.MethodPost, "/hooks/gh", githubHeaders("ping", "d1", ghSecret, []byte("{}")), body,
			http.StatusUnauthorized, hooks.ResultBadSignature, "gh//bad_signature", ""},
		{"AGiteaDeliveryWithAWrongSignatureIsUnauthorized", http.MethodPost, "/hooks/tea", giteaHeaders("status", "d1", ghSecret, body), body,
			http.StatusUnauthorized, hooks.ResultBadSignature, "tea//bad_signature", ""},
		{"ABodyOverMaxBodyIsTooLarge", http.MethodPost, "/hooks/gh", githubHeaders("ping", "d1", ghSecret, big), big,
			http.StatusRequestEntityTooLarge, hooks.ResultTooLarge, "gh//too_large", "1024 bytes"},
		{"AGetIsMethodNotAllowed", http.MethodGet, "/hooks/gh", nil, nil, http.StatusMethodNotAllowed, "", "", ""},
		{"APutIsMethodNotAllowed", http.MethodPut, "/hooks/gh", githubHeaders("ping", "d1", ghSecret, body), body,
			http.StatusMethodNotAllowed, "", "", ""},
		{"AnotherPathIsNotFound", http.MethodPost, "/hooks/gh/extra", githubHeaders("ping", "d1", ghSecret, body), body,
			http.StatusNotFound, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t, func(o *hooks.Options) { o.MaxBody = 1024 })
			a := hs.do(t, c.method, c.path, c.header, c.body)
			if a.Code != c.code || a.Result != c.result {
				t.Fatalf("answered %d %q (%s), want %d %q", a.Code, a.Result, a.Message, c.code, c.result)
			}
			if !strings.Contains(a.Message, c.message) {
				t.Fatalf("message %q does not say %q", a.Message, c.message)
			}
			if c.observed != "" && hs.obs.count(c.observed) != 1 {
				t.Fatalf("observer counts %v, want %s once", hs.obs.n, c.observed)
			}
			if got := hs.sink.got(); len(got) != 0 {
				t.Fatalf("the sink got %v", got)
			}
			if hs.seen.has("gh", "d1") || hs.seen.has("tea", "d1") {
				t.Fatal("a refused delivery was marked seen")
			}
		})
	}
}

func TestAForgeWhoseSecretVariableIsEmptyIsForbidden(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	hs.setenv("TEA_HOOK", "")
	body := fixture(t, "gitea/status.json")
	a := hs.do(t, http.MethodPost, "/hooks/tea", giteaHeaders("status", "d1", "", body), body)
	if a.Code != http.StatusForbidden || a.Result != hooks.ResultNotConfigured || !strings.Contains(a.Message, "is empty") {
		t.Fatalf("answered %+v: an empty secret must not accept (an HMAC with an empty key is forgeable)", a)
	}
}

func TestARotatedSecretAppliesAtTheNextDelivery(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	body := fixture(t, "gitea/status.json")
	hs.setenv("TEA_HOOK", "rotated")
	if a := hs.do(t, http.MethodPost, "/hooks/tea", giteaHeaders("status", "d1", teaSecret, body), body); a.Code != http.StatusUnauthorized {
		t.Fatalf("the old secret: %+v", a)
	}
	if a := hs.do(t, http.MethodPost, "/hooks/tea", giteaHeaders("status", "d2", "rotated", body), body); a.Code != http.StatusOK {
		t.Fatalf("the new secret: %+v", a)
	}
}

func TestGiteaIsVerifiedByAnyOfItsSignatureHeaders(t *testing.T) {
	t.Parallel()
	body := fixture(t, "gitea/status.json")
	sig := hexMAC(teaSecret, body)
	for name, h := range map[string]http.Header{
		"X-Gitea-Signature":   {"X-Gitea-Signature": {sig}},
		"X-Forgejo-Signature": {"X-Forgejo-Signature": {sig}},
		"X-Hub-Signature-256": {"X-Hub-Signature-256": {"sha256=" + sig}},
		"a wrong one beside a right one": {"X-Gitea-Signature": {strings.Repeat("0", 64)},
			"X-Hub-Signature-256": {"sha256=" + sig}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			h.Set("X-Forgejo-Event-Type", "status")
			h.Set("X-Forgejo-Delivery", "f-1")
			a := hs.do(t, http.MethodPost, "/hooks/tea", h, body)
			if a.Code != http.StatusOK || a.Result != hooks.ResultAccepted || a.Kind != hooks.KindCheck {
				t.Fatalf("answered %+v", a)
			}
			if got := hs.sink.got(); len(got) != 1 || got[0].DeliveryID != "f-1" {
				t.Fatalf("sink got %+v", got)
			}
		})
	}
}

func TestAReplayedDeliveryIsADuplicateAndTheSinkIsNotCalled(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	body := fixture(t, "github/issue_comment.json")
	h := githubHeaders("issue_comment", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ghSecret, body)
	if a := hs.do(t, http.MethodPost, "/hooks/gh", h, body); a.Code != http.StatusOK || a.Result != hooks.ResultAccepted {
		t.Fatalf("first delivery: %+v", a)
	}
	a := hs.do(t, http.MethodPost, "/hooks/gh", h, body)
	if a.Code != http.StatusOK || a.Result != hooks.ResultDuplicate || a.Kind != hooks.KindComment {
		t.Fatalf("replay: %+v", a)
	}
	if got := hs.sink.got(); len(got) != 1 {
		t.Fatalf("the sink got %d events, want 1", len(got))
	}
	if hs.obs.count("gh/comment/duplicate") != 1 || hs.obs.count("gh/comment/accepted") != 1 {
		t.Fatalf("observer %v", hs.obs.n)
	}
	// The same id from another forge is another delivery.
	tb := fixture(t, "gitea/status.json")
	if a := hs.do(t, http.MethodPost, "/hooks/tea", giteaHeaders("status", "72d3162e-cc78-11e3-81ab-4c9367dc0958", teaSecret, tb), tb); a.Result != hooks.ResultAccepted {
		t.Fatalf("same id on another forge: %+v", a)
	}
}

func TestASinkErrorForgetsTheDeliverySoItsRedeliveryIsProcessed(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	hs.sink.setFail(errSinkDown)
	body := fixture(t, "github/status.json")
	h := githubHeaders("status", "d-503", ghSecret, body)
	a := hs.do(t, http.MethodPost, "/hooks/gh", h, body)
	if a.Code != http.StatusServiceUnavailable || a.Result != hooks.ResultSinkError || a.Kind != hooks.KindCheck {
		t.Fatalf("answered %+v", a)
	}
	if hs.seen.has("gh", "d-503") {
		t.Fatal("the delivery is still marked seen after the sink failed")
	}
	hs.sink.setFail(nil)
	if a := hs.do(t, http.MethodPost, "/hooks/gh", h, body); a.Code != http.StatusOK || a.Result != hooks.ResultAccepted {
		t.Fatalf("redelivery: %+v", a)
	}
	if got := hs.sink.got(); len(got) != 1 || got[0].DeliveryID != "d-503" {
		t.Fatalf("sink got %+v", got)
	}
	if !hs.seen.has("gh", "d-503") {
		t.Fatal("the processed redelivery is not marked seen")
	}
	if hs.obs.count("gh/check/sink_error") != 1 || hs.obs.count("gh/check/accepted") != 1 {
		t.Fatalf("observer %v", hs.obs.n)
	}
	if !strings.Contains(hs.logs.String(), "sink down") {
		t.Fatalf("the sink's error is not logged:\n%s", hs.logs.String())
	}
}

func TestASeenStoreFailureAnswers503WithoutCallingTheSink(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	hs.seen.err = errSinkDown
	body := fixture(t, "github/status.json")
	a := hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders("status", "d1", ghSecret, body), body)
	if a.Code != http.StatusServiceUnavailable || a.Result != hooks.ResultStoreError {
		t.Fatalf("answered %+v", a)
	}
	if got := hs.sink.got(); len(got) != 0 {
		t.Fatalf("the sink got %v", got)
	}
}

func TestADeliveryWithoutAnIDIsProcessedEveryTimeAndLogged(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	body := fixture(t, "github/status.json")
	h := githubHeaders("status", "", ghSecret, body)
	for range 2 {
		if a := hs.do(t, http.MethodPost, "/hooks/gh", h, body); a.Result != hooks.ResultAccepted {
			t.Fatalf("answered %+v", a)
		}
	}
	if got := hs.sink.got(); len(got) != 2 || got[0].DeliveryID != "" {
		t.Fatalf("sink got %+v", got)
	}
	if !strings.Contains(hs.logs.String(), "without an id") {
		t.Fatalf("not logged:\n%s", hs.logs.String())
	}
}

func TestWithoutASeenStoreEveryDeliveryIsProcessed(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, func(o *hooks.Options) { o.Seen = nil })
	body := fixture(t, "github/status.json")
	h := githubHeaders("status", "d1", ghSecret, body)
	hs.do(t, http.MethodPost, "/hooks/gh", h, body)
	hs.do(t, http.MethodPost, "/hooks/gh", h, body)
	if got := hs.sink.got(); len(got) != 2 {
		t.Fatalf("sink got %d", len(got))
	}
}

func TestEventsNotUsedAreIgnoredNeverRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, forge, event string
		body               []byte
		code               int
	}{
		{"APingAnswers200", "gh", "ping", []byte(`{"zen":"Design for failure.","hook_id":1}`), http.StatusOK},
		{"APushIsIgnored", "gh", "push", []byte(`{"ref":"refs/heads/main","repository":{"full_name":"o/r"}}`), http.StatusAccepted},
		{"AnEventWithoutAHeaderIsIgnored", "gh", "", []byte(`{}`), http.StatusAccepted},
		{"AnInProgressCheckRunIsIgnored", "gh", "check_run", []byte(`{"action":"created","check_run":{"name":"t","status":"queued","head_sha":"abc"}}`),
			http.StatusAccepted},
		{"AnEditedCommentIsIgnored", "gh", "issue_comment", []byte(`{"action":"edited","issue":{"number":1},"comment":{"body":"x"}}`),
			http.StatusAccepted},
		{"APendingReviewIsIgnored", "gh", "pull_request_review", []byte(`{"action":"submitted","review":{"state":"pending"},"pull_request":{"number":1}}`),
			http.StatusAccepted},
		{"AnUnlabeledPullRequestIsIgnored", "gh", "pull_request", []byte(`{"action":"unlabeled","pull_request":{"number":1},"label":{"name":"x"}}`),
			http.StatusAccepted},
		{"AMalformedPayloadIsIgnored", "gh", "status", []byte(`{"sha": 12`), http.StatusAccepted},
		{"APayloadOfTheWrongShapeIsIgnored", "gh", "issue_comment", []byte(`[1, 2]`), http.StatusAccepted},
		{"AGiteaPushIsIgnored", "tea", "push", []byte(`{"ref":"refs/heads/main"}`), http.StatusAccepted},
		{"AGiteaReviewRequestIsIgnored", "tea", "pull_request_review_request", []byte(`{"action":"review_requested","pull_request":{"number":1}}`),
			http.StatusAccepted},
		{"AGiteaLabelClearedIsIgnored", "tea", "pull_request_label", []byte(`{"action":"label_cleared","pull_request":{"number":1}}`),
			http.StatusAccepted},
		{"AGiteaRunningJobIsIgnored", "tea", "workflow_job", []byte(`{"action":"in_progress","workflow_job":{"name":"test","head_sha":"abc","status":"in_progress"}}`),
			http.StatusAccepted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			h := githubHeaders(c.event, "d1", ghSecret, c.body)
			if c.forge == "tea" {
				h = giteaHeaders(c.event, "d1", teaSecret, c.body)
			}
			a := hs.do(t, http.MethodPost, "/hooks/"+c.forge, h, c.body)
			if a.Code != c.code || a.Result != hooks.ResultIgnored {
				t.Fatalf("answered %+v, want %d ignored", a, c.code)
			}
			if got := hs.sink.got(); len(got) != 0 {
				t.Fatalf("the sink got %+v", got)
			}
			if hs.seen.has(c.forge, "d1") {
				t.Fatal("an ignored delivery was marked seen")
			}
			if hs.obs.count(c.forge+"//ignored") != 1 {
				t.Fatalf("observer %v", hs.obs.n)
			}
		})
	}
}

func TestFromConfigReadsTheSecretFromTheEnvironmentAtEachDelivery(t *testing.T) {
	// Not parallel: it sets an environment variable.
	t.Setenv("OUTERLOOP_TEST_HOOK_SECRET", "first")
	forges := hooks.FromConfig(map[string]config.ForgeConfig{
		"gh":   {Kind: workitems.ForgeGitHub, WebhookSecretEnv: "OUTERLOOP_TEST_HOOK_SECRET"},
		"bare": {Kind: workitems.ForgeGitHub},
	}, nil)
	if forges["bare"].Secret != nil {
		t.Fatal("a forge without webhook_secret_env has a secret getter")
	}
	if got := forges["gh"].Secret(); got != "first" {
		t.Fatalf("secret %q", got)
	}
	t.Setenv("OUTERLOOP_TEST_HOOK_SECRET", "second")
	if got := forges["gh"].Secret(); got != "second" {
		t.Fatalf("after rotation: secret %q", got)
	}
}

func TestASinkThatPanicsIsASinkError(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, func(o *hooks.Options) {
		o.Sink = hooks.SinkFunc(func(context.Context, hooks.Event) error { panic("boom") })
	})
	body := fixture(t, "github/status.json")
	a := hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders("status", "d-panic", ghSecret, body), body)
	if a.Code != http.StatusServiceUnavailable || a.Result != hooks.ResultSinkError {
		t.Fatalf("answered %+v", a)
	}
	if hs.seen.has("gh", "d-panic") {
		t.Fatal("the delivery is still marked seen after the sink panicked")
	}
}
