// Package hooks owns outerloop's forge webhooks: POST /hooks/{forge}, where {forge} is a key of
// the deployment's forges:. Handler checks each delivery's signature, normalises its payload
// into an Event (a check reached a state, a review, a line comment, a pull request opened,
// closed, merged, reopened or updated, a comment, labels added), drops a delivery id it has
// seen before, and hands the event to a Sink. It decides nothing and knows nothing about
// items: the Sink's owner does.
//
// A delivery goes through, in order (the first that applies answers):
//
//	{forge} not in forges:                        404 unknown_forge
//	no webhook_secret_env, or its variable empty  403 not_configured (the message names the setting)
//	body larger than MaxBody (5 MiB)              413 too_large
//	body not received by the server's deadline    408 (no result: the connection closes; api.BoundBodies)
//	signature missing or wrong                    401 bad_signature (nothing stored, nothing sent)
//	ping                                          200 ignored
//	event or action not used, payload unreadable  202 ignored (never 4xx: forges disable failing hooks)
//	delivery id seen before                       200 duplicate (the sink is not called)
//	the Seen store fails                          503 store_error (the sink is not called)
//	the sink fails                                503 sink_error (the id is forgotten: a redelivery is processed)
//	otherwise                                     200 accepted
//
// Other methods answer 405 and other paths 404 (Go's ServeMux).
//
// Secrets: each forge's shared secret is read from the environment variable its
// webhook_secret_env names at every delivery, so it rotates without a restart. Signatures are
// HMAC-SHA256 of the raw body in hex, compared in constant time: GitHub's X-Hub-Signature-256
// ("sha256=…"); Gitea's X-Gitea-Signature, Forgejo's X-Forgejo-Signature, or the
// X-Hub-Signature-256 Gitea also sends. The secret and the body are never logged.
//
// Deduplication: by the forge's delivery id (X-GitHub-Delivery; X-Gitea-Delivery or
// X-Forgejo-Delivery), marked in a Seen store before the sink is called and forgotten if the
// sink fails. RedisSeen keeps one key per delivery (SET NX, 7 days) under the caller's prefix.
// A delivery without an id is processed, without deduplication, and logged.
//
// Payloads read (both forges' documented shapes; Gitea's from its modules/structs/hook.go, the
// version lib/giteatest runs):
//
//	GitHub (X-GitHub-Event)        Gitea/Forgejo (X-Gitea-Event-Type)        Kind
//	status                         status                                    check
//	check_run completed            workflow_job, workflow_run with a         check
//	                               conclusion (Gitea Actions)
//	pull_request_review            pull_request_review_approved, _rejected,  review
//	  submitted, dismissed           _comment (a review of type comment)
//	pull_request_review_comment    (Gitea sends line comments in reviews)    review_comment
//	pull_request opened, closed,   pull_request opened, closed, reopened;    pull_request
//	  reopened, synchronize          pull_request_sync synchronized
//	issue_comment created          issue_comment, pull_request_comment       comment
//	issues / pull_request labeled  issue_label / pull_request_label          labeled
//	                                 label_updated (Labeled.Current: Gitea
//	                                 does not say which labels were added)
//
// Check states are mapped as forge maps the same results read from the APIs (forge's mappings
// are unexported, so hooks keeps a copy; tests compare the two on every state, through
// forge.Checks against a real Gitea and against GitHub's documented API shapes).
//
// Metrics: an Observer is told every outcome (package metrics counts
// outerloop_webhook_deliveries_total{forge, event, result}).
//
// Tests: the Gitea side runs against a real Gitea (lib/giteatest) delivering to the
// handler; GitHub is out of reach, so its payloads are fixtures in GitHub's documented shapes
// (testdata/github), signed as GitHub signs them.
package hooks
