package hooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"outerloop/hooks"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// retryRequests is a consumer's Sink: it keeps the pull requests on which someone asked for a
// retry, and ignores everything else. It decides what an event means; the handler does not.
type retryRequests struct{ prs chan int }

func (r retryRequests) Handle(ctx context.Context, e hooks.Event) error {
	if e.Kind != hooks.KindComment || !e.IsPR || strings.TrimSpace(e.Comment.Body) != "/outerloop retry" {
		return nil
	}
	select {
	case r.prs <- e.Number:
		return nil
	case <-ctx.Done():
		return ctx.Err() // 503: the forge redelivers later
	}
}

func Example() {
	sink := retryRequests{prs: make(chan int, 1)}
	forges := hooks.FromConfig(map[string]config.ForgeConfig{
		"tea": {Kind: workitems.ForgeGitea, BaseURL: "https://gitea.example.com", WebhookSecretEnv: "GITEA_WEBHOOK_SECRET"},
	}, func(string) string { return "s3cret" }) // os.Getenv in a deployment
	srv := httptest.NewServer(hooks.Handler(hooks.Options{Forges: forges, Sink: sink}))
	defer srv.Close()

	// What Gitea sends when someone comments on pull request 4.
	body := `{"action":"created","is_pull":true,"issue":{"number":4},"comment":{"user":{"login":"maintainer"},"body":"/outerloop retry"},` +
		`"repository":{"full_name":"acme/payments"},"sender":{"login":"maintainer"}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/tea", strings.NewReader(body))
	req.Header.Set("X-Gitea-Event-Type", "pull_request_comment")
	req.Header.Set("X-Gitea-Delivery", "8c0e6b7a-1f7e-4c3e-9d7a-2b1f3e4d5c6b")
	mac := hmac.New(sha256.New, []byte("s3cret")) // Gitea signs the raw body with the hook's secret
	mac.Write([]byte(body))
	req.Header.Set("X-Gitea-Signature", hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "retry asked on pull request", <-sink.prs)
	// Output: 200 retry asked on pull request 4
}
