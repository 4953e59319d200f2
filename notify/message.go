package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Notification is what a sink is told: the JSON body of a webhook, and what a Slack message is
// written from. ID is the event's id, the same for every retry and every sink.
type Notification struct {
	ID       string                `json:"id"`
	Event    workitems.NotifyEvent `json:"event"`
	At       time.Time             `json:"at"`
	Template string                `json:"template"`
	Item     string                `json:"item,omitempty"`
	State    workitems.State       `json:"state,omitempty"`
	Attempt  int                   `json:"attempt,omitempty"`
	// Reason is the machine-readable cause (an escalation's rule, "daily_cost_cap").
	Reason string `json:"reason,omitempty"`
	// Headline is one line for a person.
	Headline string `json:"headline"`
	// Output is, for an escalation after a failing command, its last lines (redacted).
	Output string `json:"output,omitempty"`
	// URL links the item in the console (when notify.base_url is set).
	URL string `json:"url,omitempty"`
	// Escalate is the template's escalate: (who is to act), when it has one.
	Escalate string `json:"escalate,omitempty"`
}

// itemURL links an item in the console.
func itemURL(base, id string) string {
	if base == "" || id == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/items/" + id
}

// forTransition returns the notification of an item's transition into an escalated or failed
// state, and false for any other transition.
func forTransition(it *workitems.Item, from workitems.State, events []workitems.Event, base string, t *config.Template) (Notification, bool) {
	n := Notification{Template: it.Template, Item: it.ID, State: it.State, Attempt: it.Attempt, At: it.UpdatedAt.UTC(),
		URL: itemURL(base, it.ID)}
	if t != nil {
		n.Escalate = t.Escalate
	}
	switch {
	case it.State == workitems.StateEscalated && from != workitems.StateEscalated:
		n.Event = workitems.NotifyEscalation
		summary := ""
		if e := it.Escalation; e != nil {
			n.Reason, summary, n.Output = e.Reason, e.Summary, e.Output
		}
		n.Headline = fmt.Sprintf("%s (%s) escalated after attempt %d: %s", it.ID, it.Template, it.Attempt,
			firstNonEmpty(summary, n.Reason, "needs a person"))
	case it.State == workitems.StateFailed && from != workitems.StateFailed:
		n.Event = workitems.NotifyFailure
		why := ""
		for _, e := range events {
			if e.Type == workitems.EventWarning && e.Message != "" {
				why = e.Message
			}
		}
		n.Reason = "failed"
		n.Headline = fmt.Sprintf("%s (%s) failed for good: %s", it.ID, it.Template, firstNonEmpty(why, "see its events"))
	default:
		return Notification{}, false
	}
	// The item's version is new with every committed update, so the id is unique per transition
	// and the same however often the dispatcher retries it.
	n.ID = fmt.Sprintf("%s:%s:%d", n.Event, it.ID, it.Version)
	return n, true
}

// forDailyCap returns the notification of template t reaching its daily cost cap on day at.
func forDailyCap(template string, t *config.Template, at time.Time) Notification {
	day := at.UTC().Format("2006-01-02")
	n := Notification{ID: fmt.Sprintf("%s:%s:%s", workitems.NotifyDailyCap, template, day), Event: workitems.NotifyDailyCap,
		At: at.UTC(), Template: template, Reason: "daily_cost_cap"}
	cap := ""
	if t != nil {
		n.Escalate = t.Escalate
		cap = fmt.Sprintf(" of $%.2f", t.DailyCostCapUSD)
	}
	n.Headline = fmt.Sprintf("template %s reached its daily cost cap%s on %s: its items are skipped until 00:00 UTC", template, cap, day)
	return n
}

// forFleetPaused returns the notification of fleet template t's breaker pausing it at at.
func forFleetPaused(template string, t *config.Template, reason string, at time.Time) Notification {
	n := Notification{ID: fmt.Sprintf("%s:%s:%d", workitems.NotifyFleetPaused, template, at.UnixMilli()), Event: workitems.NotifyFleetPaused,
		At: at.UTC(), Template: template, Reason: "fleet_breaker"}
	if t != nil {
		n.Escalate = t.Escalate
	}
	n.Headline = fmt.Sprintf("template %s paused itself: %s; resume it with `outerloop templates resume %s`", template, reason, template)
	return n
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// webhookBody is a generic webhook's body: the notification as JSON.
func webhookBody(n Notification) ([]byte, error) { return json.Marshal(n) }

// slackMessage is a Slack-compatible incoming webhook's body.
type slackMessage struct {
	Text string `json:"text"`
}

// slackBody writes the notification as one Slack message: the event, the item linked to the
// console, the headline.
func slackBody(n Notification) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*outerloop: %s*", n.Event)
	switch {
	case n.Item != "" && n.URL != "":
		fmt.Fprintf(&b, " <%s|%s>", n.URL, slackEscape(n.Item))
	case n.Item != "":
		fmt.Fprintf(&b, " %s", slackEscape(n.Item))
	}
	fmt.Fprintf(&b, " (template %s)\n%s", slackEscape(n.Template), slackEscape(n.Headline))
	if n.Escalate != "" {
		fmt.Fprintf(&b, "\nto act: %s", slackEscape(n.Escalate))
	}
	if n.Output != "" {
		fmt.Fprintf(&b, "\n```%s```", slackEscape(strings.ReplaceAll(n.Output, "```", "' ' '")))
	}
	return json.Marshal(slackMessage{Text: b.String()})
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning to.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
