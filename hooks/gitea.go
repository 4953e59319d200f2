package hooks

import (
	"cmp"
	"encoding/json"

	"outerloop/forge"
)

// Gitea's payloads (modules/structs/hook.go in Gitea; Forgejo keeps the same shapes) follow
// GitHub's field names for users, repositories, issues and pull requests, so the gh* types read
// them; what differs is below.

// giteaPayload is the union of the Gitea payloads read.
type giteaPayload struct {
	Action     string     `json:"action"`
	Repository ghRepo     `json:"repository"`
	Sender     ghUser     `json:"sender"`
	Pull       *ghPull    `json:"pull_request"`
	Issue      *ghIssue   `json:"issue"`
	Comment    *ghComment `json:"comment"`
	IsPull     bool       `json:"is_pull"`
	Changes    *struct {
		AddedLabels []ghLabel `json:"added_labels"`
	} `json:"changes"`

	// status
	SHA         string `json:"sha"`
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`

	// pull_request_review_*
	Review *struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	} `json:"review"`

	// Gitea Actions
	WorkflowJob *giteaRun `json:"workflow_job"`
	WorkflowRun *giteaRun `json:"workflow_run"`
	Workflow    *struct {
		Name string `json:"name"`
	} `json:"workflow"`
}

// giteaRun is a Gitea Actions workflow job or run.
type giteaRun struct {
	Name         string `json:"name"`
	DisplayTitle string `json:"display_title"`
	HeadSHA      string `json:"head_sha"`
	HeadBranch   string `json:"head_branch"`
	Status       string `json:"status"`
	Conclusion   string `json:"conclusion"`
	HTMLURL      string `json:"html_url"`
}

// giteaReviewStates maps Gitea's review event types to review states.
var giteaReviewStates = map[string]string{
	"pull_request_review_approved": reviewApproved,
	"pull_request_review_rejected": reviewChangesRequested,
	"pull_request_review_comment":  reviewCommented,
}

// parseGitea normalises a Gitea or Forgejo event (X-Gitea-Event-Type: the precise type).
func parseGitea(event string, body []byte) (*Event, error) {
	switch event {
	case "status", "pull_request", "pull_request_sync", "pull_request_review_approved", "pull_request_review_rejected",
		"pull_request_review_comment", "issue_comment", "pull_request_comment", "issues", "issue_label",
		"pull_request_label", "workflow_job", "workflow_run":
	default:
		return nil, nil
	}
	var p giteaPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	e := &Event{Repo: p.Repository.FullName, Sender: p.Sender.Login}
	switch event {
	case "status":
		e.Kind, e.SHA = KindCheck, p.SHA
		e.Check = &Check{Name: p.Context, State: forge.GiteaStatusState(p.State), URL: p.TargetURL, Summary: forge.CheckSummary(p.Description)}
	case "workflow_job", "workflow_run":
		r, name := p.WorkflowJob, ""
		if event == "workflow_run" {
			r = p.WorkflowRun
			if p.Workflow != nil {
				name = p.Workflow.Name
			}
		}
		if r == nil || r.HeadSHA == "" || r.Conclusion == "" {
			return nil, nil // queued or running: its commit status says so
		}
		e.Kind, e.SHA, e.Branch = KindCheck, r.HeadSHA, r.HeadBranch
		e.Check = &Check{Name: cmp.Or(r.Name, name, r.DisplayTitle), State: forge.CheckRunState(r.Status, r.Conclusion),
			URL: r.HTMLURL}
	case "pull_request", "pull_request_sync":
		if p.Pull == nil {
			return nil, nil
		}
		if p.Action == "label_updated" {
			// A Gitea without X-Gitea-Event-Type sends pull_request_label as pull_request.
			return giteaLabeled(e, &p), nil
		}
		a := giteaPRAction(p.Action, p.Pull.Merged)
		if a == "" {
			return nil, nil
		}
		pullFields(e, p.Pull)
		e.Kind = KindPullRequest
		e.PullRequest = pullRequest(a, p.Pull)
	case "pull_request_review_approved", "pull_request_review_rejected", "pull_request_review_comment":
		if p.Pull == nil || p.Action != "reviewed" {
			return nil, nil
		}
		pullFields(e, p.Pull)
		e.Kind = KindReview
		body := ""
		if p.Review != nil {
			body = p.Review.Content
		}
		e.Review = &Review{User: p.Sender.Login, State: giteaReviewStates[event], Body: body}
	case "issue_comment", "pull_request_comment":
		if p.Action != "created" || p.Issue == nil || p.Comment == nil {
			return nil, nil
		}
		e.Kind, e.Number = KindComment, p.Issue.Number
		e.IsPR = p.IsPull || p.Issue.PullRequest != nil || event == "pull_request_comment"
		e.Comment = &Comment{User: p.Comment.User.Login, Body: p.Comment.Body, URL: p.Comment.HTMLURL}
	case "issues", "issue_label", "pull_request_label":
		return giteaLabeled(e, &p), nil
	}
	return e, nil
}

// giteaLabeled reads label_updated. Gitea's webhook does not say which labels were added (its
// changes.added_labels is only filled for Actions), so the event carries the labels the issue
// has now (Current), unless a payload names the added ones.
func giteaLabeled(e *Event, p *giteaPayload) *Event {
	if p.Action != "label_updated" {
		return nil
	}
	var labels []ghLabel
	e.Labeled = &Labeled{User: p.Sender.Login}
	switch {
	case p.Pull != nil:
		pullFields(e, p.Pull)
		labels, e.Labeled.Title, e.Labeled.Body = p.Pull.Labels, p.Pull.Title, p.Pull.Body
	case p.Issue != nil:
		e.Number, e.IsPR = p.Issue.Number, p.Issue.PullRequest != nil
		labels, e.Labeled.Title, e.Labeled.Body = p.Issue.Labels, p.Issue.Title, p.Issue.Body
	default:
		return nil
	}
	if p.Changes != nil && len(p.Changes.AddedLabels) > 0 {
		labels = p.Changes.AddedLabels
	} else {
		e.Labeled.Current = true
	}
	if len(labels) == 0 {
		return nil // every label was removed
	}
	e.Kind = KindLabeled
	for _, l := range labels {
		e.Labeled.Labels = append(e.Labeled.Labels, l.Name)
	}
	return e
}

// giteaPRAction maps a pull request action; "" for those outerloop does not use.
func giteaPRAction(action string, merged bool) PRAction {
	switch action {
	case "opened":
		return PROpened
	case "closed":
		if merged {
			return PRMerged
		}
		return PRClosed
	case "reopened":
		return PRReopened
	case "synchronized":
		return PRSynchronized
	}
	return ""
}
