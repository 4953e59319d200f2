package hooks

import (
	"cmp"
	"encoding/json"
	"strings"

	"outerloop/forge"
	"outerloop/workitems"
)

// The parts of GitHub's (and Gitea's, which copies their shape) webhook payloads that are read.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads

type ghUser struct {
	Login string `json:"login"`
}

type ghRepo struct {
	FullName string `json:"full_name"`
}

type ghLabel struct {
	Name string `json:"name"`
}

type ghBranchRef struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

type ghPull struct {
	Number         int         `json:"number"`
	Title          string      `json:"title"`
	Body           string      `json:"body"`
	State          string      `json:"state"`
	Merged         bool        `json:"merged"`
	MergedBy       *ghUser     `json:"merged_by"`
	MergeCommitSHA *string     `json:"merge_commit_sha"`
	Head           ghBranchRef `json:"head"`
	Labels         []ghLabel   `json:"labels"`
}

type ghIssue struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	// PullRequest is present when the issue is a pull request.
	PullRequest *json.RawMessage `json:"pull_request"`
	Labels      []ghLabel        `json:"labels"`
}

type ghComment struct {
	User    ghUser `json:"user"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	// Review comments only.
	Path         string `json:"path"`
	Line         *int   `json:"line"`
	OriginalLine *int   `json:"original_line"`
	CommitID     string `json:"commit_id"`
}

// ghPayload is the union of the payloads read: each event fills its own fields.
type ghPayload struct {
	Action     string     `json:"action"`
	Repository ghRepo     `json:"repository"`
	Sender     ghUser     `json:"sender"`
	Number     int        `json:"number"`
	Pull       *ghPull    `json:"pull_request"`
	Issue      *ghIssue   `json:"issue"`
	Comment    *ghComment `json:"comment"`
	Label      *ghLabel   `json:"label"`

	// status
	SHA         string `json:"sha"`
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
	Branches    []struct {
		Name   string `json:"name"`
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	} `json:"branches"`

	// check_run
	CheckRun *struct {
		Name       string `json:"name"`
		HeadSHA    string `json:"head_sha"`
		Status     string `json:"status"`
		Conclusion string `json:"conclusion"`
		HTMLURL    string `json:"html_url"`
		DetailsURL string `json:"details_url"`
		Output     struct {
			Title   string `json:"title"`
			Summary string `json:"summary"`
		} `json:"output"`
		CheckSuite struct {
			HeadBranch string `json:"head_branch"`
		} `json:"check_suite"`
	} `json:"check_run"`

	// pull_request_review
	Review *struct {
		User     ghUser `json:"user"`
		Body     string `json:"body"`
		State    string `json:"state"`
		CommitID string `json:"commit_id"`
	} `json:"review"`
}

// parseGitHub normalises a GitHub event (X-GitHub-Event).
func parseGitHub(event string, body []byte) (*Event, error) {
	switch event {
	case "status", "check_run", "pull_request_review", "pull_request_review_comment", "issue_comment",
		"pull_request", "issues":
	default:
		return nil, nil
	}
	var p ghPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	e := &Event{Repo: p.Repository.FullName, Sender: p.Sender.Login}
	switch event {
	case "status":
		e.Kind, e.SHA = KindCheck, p.SHA
		e.Check = &Check{Name: p.Context, State: forge.GitHubStatusState(p.State), URL: p.TargetURL, Summary: forge.CheckSummary(p.Description)}
		if len(p.Branches) == 1 && p.Branches[0].Commit.SHA == p.SHA {
			e.Branch = p.Branches[0].Name
		}
	case "check_run":
		r := p.CheckRun
		if p.Action != "completed" || r == nil {
			return nil, nil
		}
		e.Kind, e.SHA, e.Branch = KindCheck, r.HeadSHA, r.CheckSuite.HeadBranch
		e.Check = &Check{Name: r.Name, State: forge.CheckRunState(r.Status, r.Conclusion), URL: cmp.Or(r.HTMLURL, r.DetailsURL),
			Summary: forge.CheckSummary(cmp.Or(r.Output.Title, r.Output.Summary))}
	case "pull_request_review":
		if p.Review == nil || p.Pull == nil {
			return nil, nil
		}
		state := ""
		switch p.Action {
		case "submitted":
			state = githubReviewState(p.Review.State)
		case "dismissed":
			state = reviewDismissed
		}
		if state == "" {
			return nil, nil
		}
		pullFields(e, p.Pull)
		e.SHA = cmp.Or(p.Review.CommitID, e.SHA)
		e.Kind = KindReview
		e.Review = &Review{User: p.Review.User.Login, State: state, Body: p.Review.Body}
	case "pull_request_review_comment":
		c := p.Comment
		if p.Action != "created" || c == nil || p.Pull == nil {
			return nil, nil
		}
		pullFields(e, p.Pull)
		e.Kind, e.SHA = KindReviewComment, cmp.Or(c.CommitID, e.SHA)
		line := 0
		if c.Line != nil {
			line = *c.Line
		}
		e.ReviewComment = &ReviewComment{User: c.User.Login, Path: c.Path, Line: line, Body: c.Body, URL: c.HTMLURL}
	case "issue_comment":
		if p.Action != "created" || p.Issue == nil || p.Comment == nil {
			return nil, nil
		}
		e.Kind, e.Number, e.IsPR = KindComment, p.Issue.Number, p.Issue.PullRequest != nil
		e.Comment = &Comment{User: p.Comment.User.Login, Body: p.Comment.Body, URL: p.Comment.HTMLURL}
	case "pull_request":
		if p.Pull == nil {
			return nil, nil
		}
		if p.Action == "labeled" {
			if p.Label == nil {
				return nil, nil
			}
			pullFields(e, p.Pull)
			e.Kind = KindLabeled
			e.Labeled = &Labeled{Labels: []string{p.Label.Name}, User: p.Sender.Login, Title: p.Pull.Title, Body: p.Pull.Body}
			return e, nil
		}
		a := githubPRAction(p.Action, p.Pull.Merged)
		if a == "" {
			return nil, nil
		}
		pullFields(e, p.Pull)
		e.Kind = KindPullRequest
		e.PullRequest = pullRequest(a, p.Pull)
	case "issues":
		if p.Action != "labeled" || p.Issue == nil || p.Label == nil {
			return nil, nil
		}
		e.Kind, e.Number, e.IsPR = KindLabeled, p.Issue.Number, p.Issue.PullRequest != nil
		e.Labeled = &Labeled{Labels: []string{p.Label.Name}, User: p.Sender.Login, Title: p.Issue.Title, Body: p.Issue.Body}
	}
	return e, nil
}

// pullFields sets the event's pull request number, head branch and head commit.
func pullFields(e *Event, p *ghPull) {
	e.Number, e.IsPR, e.Branch, e.SHA = p.Number, true, p.Head.Ref, p.Head.SHA
}

// pullRequest builds the pull_request part; the state follows the action.
func pullRequest(a PRAction, p *ghPull) *PullRequest {
	pr := &PullRequest{Action: a, State: workitems.PROpen, Title: p.Title}
	switch a {
	case PRClosed:
		pr.State = workitems.PRClosed
	case PRMerged:
		pr.State = workitems.PRMerged
		if p.MergedBy != nil {
			pr.MergedBy = p.MergedBy.Login
		}
		if p.MergeCommitSHA != nil {
			pr.MergeCommitSHA = *p.MergeCommitSHA
		}
	}
	return pr
}

// githubPRAction maps a pull_request action; "" for those outerloop does not use.
func githubPRAction(action string, merged bool) PRAction {
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
	case "synchronize":
		return PRSynchronized
	}
	return ""
}

// githubReviewState maps a submitted review's state (lower-case in webhooks, upper-case in the
// REST API); "" for one outerloop does not use (pending).
func githubReviewState(s string) string {
	switch strings.ToLower(s) {
	case "approved":
		return reviewApproved
	case "changes_requested":
		return reviewChangesRequested
	case "commented":
		return reviewCommented
	case "dismissed":
		return reviewDismissed
	}
	return ""
}
