package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/shorten"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Submitter makes items and answers what the triggers need of the queue (scheduler.Queue).
type Submitter interface {
	SubmitTriggered(ctx context.Context, r scheduler.Request, source workitems.TriggerSource) (*workitems.Item, error)
	PauseOf(ctx context.Context, template string) (*scheduler.Pause, error)
}

// Resolver records a group's resolution on an item (itemstore.Store).
type Resolver interface {
	AlertResolved(ctx context.Context, id string, at time.Time, actor string) (*workitems.Item, itemstore.AlertEffect, error)
}

// Triggers makes the items of the templates that subscribe to a receiver's alerts.
//
// A firing group matches a template when one of its firing alerts matches one of the
// template's alertmanager triggers on that receiver (any alert, not all: a group gathers
// alerts of one cause, and one of them is enough to start looking). Its item records the
// matching alerts (Origin.Alert) and its first attempt's input carries their labels,
// annotations, start time and source link.
type Triggers struct {
	q     Submitter
	res   Resolver
	rdb   redis.Cmdable
	keys  keys
	cfg   func() *config.Config
	log   *slog.Logger
	obs   scheduler.TriggerObserver
	clock workitems.Clock
}

// GroupIndexTTL is how long a group's items are remembered for its resolved notification,
// from the latest firing: longer than alerts usually fire.
const GroupIndexTTL = 14 * 24 * time.Hour

// MaxGoal bounds a rendered goal, in bytes.
const MaxGoal = 4 << 10

// MaxInput bounds the first attempt's input, in bytes.
const MaxInput = 16 << 10

// NewTriggers returns the alert triggers of q's templates: cfg returns the config in force;
// the group index lives in rdb under prefix (the store's).
func NewTriggers(q *scheduler.Queue, cfg func() *config.Config, log *slog.Logger) *Triggers {
	s := q.Store()
	return newTriggers(q, s, s.Redis(), s.Prefix(), cfg, log, s.Clock())
}

func newTriggers(q Submitter, res Resolver, rdb redis.Cmdable, prefix string, cfg func() *config.Config, log *slog.Logger, clock workitems.Clock) *Triggers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &Triggers{q: q, res: res, rdb: rdb, keys: keys{p: prefix}, cfg: cfg, log: log, clock: clock}
}

// WithObserver counts every firing on o; it returns t.
func (t *Triggers) WithObserver(o scheduler.TriggerObserver) *Triggers {
	t.obs = o
	return t
}

func (t *Triggers) fired(template string, r workitems.TriggerResult) {
	if t.obs != nil {
		t.obs.TriggerFiring(template, workitems.TriggerSourceAlertmanager, r)
	}
}

// Outcome is what one notification did, per template (firing) or item (resolved).
type Outcome struct {
	Made         []string `json:"made,omitempty"`
	Deduplicated []string `json:"deduplicated,omitempty"`
	Capped       []string `json:"capped,omitempty"`
	Paused       []string `json:"paused,omitempty"`
	Refused      []string `json:"refused,omitempty"`
	Cancelled    []string `json:"cancelled,omitempty"`
	Noted        []string `json:"noted,omitempty"`
}

// Notify handles an authenticated notification of receiver. It returns an error only for
// trouble worth Alertmanager's retry (Redis).
func (t *Triggers) Notify(ctx context.Context, receiver string, n *Notification) (Outcome, error) {
	if n.Status == StatusResolved {
		return t.resolved(ctx, receiver, n)
	}
	return t.firing(ctx, receiver, n)
}

func (t *Triggers) firing(ctx context.Context, receiver string, n *Notification) (Outcome, error) {
	var out Outcome
	firing := n.Firing()
	if len(firing) == 0 {
		return out, nil
	}
	digests := make([]string, len(firing))
	for i, a := range firing {
		digests[i] = a.Fingerprint + "@" + a.StartsAt.UTC().Format(time.RFC3339Nano)
	}
	cfg := t.cfg()
	for i := range cfg.Templates {
		tm := &cfg.Templates[i]
		matched := matching(tm, receiver, firing)
		if len(matched) == 0 {
			continue
		}
		attrs := []any{"template", tm.Name, "receiver", receiver, "group", n.GroupKey}
		if tm.IsFleet() {
			t.log.Warn("alert trigger: a fleet template's item needs a repository, which an alert does not name; no item", attrs...)
			t.fired(tm.Name, workitems.TriggerRefused)
			out.Refused = append(out.Refused, tm.Name)
			continue
		}
		p, err := t.q.PauseOf(ctx, tm.Name)
		if err != nil {
			return out, err
		}
		if p != nil {
			t.log.Info("alert trigger: template paused; no item", append(attrs, "paused_by", p.Actor)...)
			t.fired(tm.Name, workitems.TriggerPaused)
			out.Paused = append(out.Paused, tm.Name)
			continue
		}
		id := workitems.AlertTriggerItemID(tm.Name, receiver, n.GroupKey, digests)
		// Indexed before it is made: a resolved notification must find every item made, and
		// an id indexed for no item is skipped.
		if err := t.index(ctx, receiver, n.GroupKey, id); err != nil {
			return out, err
		}
		origin := workitems.Origin{Kind: workitems.OriginAlert, Actor: "alertmanager:" + receiver,
			Alert: alertOrigin(receiver, n, matched)}
		r := scheduler.Request{Template: tm.Name, ID: id, Origin: origin, Input: alertInput(receiver, n, matched),
			Goal: t.goal(tm, receiver, n, matched)}
		it, err := t.q.SubmitTriggered(ctx, r, workitems.TriggerSourceAlertmanager)
		attrs = append(attrs, "item", id)
		switch {
		case err == nil:
			t.log.Info("alert trigger: item created", append(attrs, "alertname", matched[0].Labels["alertname"])...)
			t.fired(tm.Name, workitems.TriggerMade)
			out.Made = append(out.Made, it.ID)
		case errors.Is(err, workitems.ErrExists):
			t.log.Debug("alert trigger: item exists", attrs...)
			t.fired(tm.Name, workitems.TriggerDeduplicated)
			out.Deduplicated = append(out.Deduplicated, id)
		case errors.Is(err, scheduler.ErrTriggerCapped), errors.Is(err, itemstore.ErrMaxOpen), errors.Is(err, itemstore.ErrDailyCap):
			t.log.Warn("alert trigger: no item, a limit refused it", append(attrs, "err", err)...)
			t.fired(tm.Name, workitems.TriggerCapped)
			out.Capped = append(out.Capped, tm.Name)
		case errors.Is(err, scheduler.ErrUnknownTemplate), workitems.ClassOf(err) == workitems.ClassInvalidInput:
			t.log.Warn("alert trigger: no item", append(attrs, "err", err)...)
			t.fired(tm.Name, workitems.TriggerRefused)
			out.Refused = append(out.Refused, tm.Name)
		default:
			return out, fmt.Errorf("alerts: trigger of %s: %w", tm.Name, err)
		}
	}
	return out, nil
}

// matching returns the firing alerts that match one of tm's triggers on receiver.
func matching(tm *config.Template, receiver string, firing []Alert) []Alert {
	var out []Alert
	for _, a := range firing {
		if slices.ContainsFunc(tm.Triggers, func(tr config.Trigger) bool {
			return tr.Alertmanager != nil && tr.Alertmanager.Receiver == receiver && tr.Alertmanager.Matches(a.Labels)
		}) {
			out = append(out, a)
		}
	}
	return out
}

func (t *Triggers) resolved(ctx context.Context, receiver string, n *Notification) (Outcome, error) {
	var out Outcome
	ids, err := t.rdb.SMembers(ctx, t.keys.group(receiver, n.GroupKey)).Result()
	if err != nil {
		return out, fmt.Errorf("alerts: items of group %s: %w", n.GroupKey, err)
	}
	at := n.ResolvedAt()
	if at.IsZero() {
		at = t.clock.Now()
	}
	slices.Sort(ids)
	for _, id := range ids {
		_, eff, err := t.res.AlertResolved(ctx, id, at, "alertmanager:"+receiver)
		switch {
		case errors.Is(err, workitems.ErrNotFound):
			continue // indexed, never made (capped, paused) or deleted since
		case err != nil:
			var ref *workitems.RefusedError
			if errors.As(err, &ref) {
				t.log.Warn("alert trigger: resolved; the item refused it", "item", id, "err", err)
				continue
			}
			return out, fmt.Errorf("alerts: resolved group %s: item %s: %w", n.GroupKey, id, err)
		}
		t.log.Info("alert trigger: group resolved", "item", id, "group", n.GroupKey, "effect", eff,
			"resolved_at", at.UTC().Format(time.RFC3339))
		switch eff {
		case itemstore.AlertCancelled:
			out.Cancelled = append(out.Cancelled, id)
		case itemstore.AlertNoted:
			out.Noted = append(out.Noted, id)
		}
	}
	return out, nil
}

// index remembers that id belongs to the group, for its resolved notification.
func (t *Triggers) index(ctx context.Context, receiver, groupKey, id string) error {
	k := t.keys.group(receiver, groupKey)
	_, err := t.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, k, id)
		p.Expire(ctx, k, GroupIndexTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("alerts: indexing item %s of group %s: %w", id, groupKey, err)
	}
	return nil
}

// alertOrigin is the bounded record of the group on the item.
func alertOrigin(receiver string, n *Notification, matched []Alert) *workitems.AlertOrigin {
	o := &workitems.AlertOrigin{Receiver: receiver, GroupKey: clipText(n.GroupKey, workitems.MaxAlertValue),
		Status: string(n.Status), Truncated: n.TruncatedAlerts}
	for i, a := range matched {
		if i == workitems.MaxAlertsRecorded {
			o.Truncated += len(matched) - i
			break
		}
		o.Alerts = append(o.Alerts, facts(a).Bounded())
	}
	return o
}

func facts(a Alert) workitems.AlertFacts {
	return workitems.AlertFacts{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt,
		GeneratorURL: a.GeneratorURL, Fingerprint: a.Fingerprint}
}

// alertInput is the first attempt's input: each matching alert's labels, annotations
// (summary, description and runbook_url first), start and source link.
func alertInput(receiver string, n *Notification, matched []Alert) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Alertmanager (receiver %s) reports %d firing alert(s) for this template", receiver, len(matched))
	if len(n.GroupLabels) > 0 {
		fmt.Fprintf(&b, ", group %s", pairs(n.GroupLabels))
	}
	b.WriteString(".\n")
	for i, a := range matched {
		fmt.Fprintf(&b, "\nAlert %d: %s\n", i+1, a.Labels["alertname"])
		fmt.Fprintf(&b, "Labels: %s\n", pairs(a.Labels))
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if v := a.Annotations[k]; v != "" {
				fmt.Fprintf(&b, "%s: %s\n", k, v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(a.Annotations)) {
			if k != "summary" && k != "description" && k != "runbook_url" {
				fmt.Fprintf(&b, "%s: %s\n", k, a.Annotations[k])
			}
		}
		if !a.StartsAt.IsZero() {
			fmt.Fprintf(&b, "Started: %s\n", a.StartsAt.UTC().Format(time.RFC3339))
		}
		if a.GeneratorURL != "" {
			fmt.Fprintf(&b, "Source: %s\n", a.GeneratorURL)
		}
	}
	return clipText(b.String(), MaxInput)
}

func pairs(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

// goal renders the template's goal as a text/template of the first matching alert
// ({{ .alert.labels.X }}, {{ .alert.annotations.summary }}, also .alerts, .groupLabels,
// .commonLabels, .commonAnnotations, .receiver, .status, .externalURL); a goal without "{{"
// is the template's as it is ("" here: Submit uses it).
func (t *Triggers) goal(tm *config.Template, receiver string, n *Notification, matched []Alert) string {
	if !strings.Contains(tm.Goal, "{{") {
		return ""
	}
	g, err := RenderGoal(tm.Goal, receiver, n, matched)
	if err != nil {
		t.log.Warn("alert trigger: the goal does not render; the template's goal is used as it is", "template", tm.Name, "err", err)
		return ""
	}
	return g
}

// RenderGoal executes goal (text/template, missingkey=zero) over the notification, .alert
// being the first of alerts; the output is clipped to MaxGoal.
func RenderGoal(goal, receiver string, n *Notification, alerts []Alert) (string, error) {
	tpl, err := template.New("goal").Option("missingkey=zero").Parse(goal)
	if err != nil {
		return "", fmt.Errorf("alerts: goal: %w", err)
	}
	all := make([]map[string]any, len(alerts))
	for i, a := range alerts {
		all[i] = map[string]any{"labels": orEmpty(a.Labels), "annotations": orEmpty(a.Annotations),
			"startsAt": a.StartsAt, "generatorURL": a.GeneratorURL, "fingerprint": a.Fingerprint, "status": string(a.Status)}
	}
	data := map[string]any{"alerts": all, "receiver": receiver, "status": string(n.Status), "externalURL": n.ExternalURL,
		"groupLabels": orEmpty(n.GroupLabels), "commonLabels": orEmpty(n.CommonLabels), "commonAnnotations": orEmpty(n.CommonAnnotations),
		"alert": map[string]any{"labels": map[string]string{}, "annotations": map[string]string{}}}
	if len(all) > 0 {
		data["alert"] = all[0]
	}
	var b limitedBuilder
	b.max = MaxGoal
	if err := tpl.Execute(&b, data); err != nil && !errors.Is(err, errGoalFull) {
		return "", fmt.Errorf("alerts: goal: %w", err)
	}
	g := strings.TrimSpace(strings.ToValidUTF8(b.String(), "\uFFFD"))
	if g == "" {
		return "", errors.New("alerts: goal: renders empty")
	}
	return g, nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

var errGoalFull = errors.New("goal longer than its bound")

// limitedBuilder stops a template's output at max bytes.
type limitedBuilder struct {
	strings.Builder
	max int
}

func (l *limitedBuilder) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); len(p) > room {
		l.Builder.Write(p[:max(room, 0)])
		return max(room, 0), errGoalFull
	}
	return l.Builder.Write(p)
}

// clipText is s as valid UTF-8, cut to at most n bytes (shorten.ClipMarked).
func clipText(s string, n int) string {
	return shorten.ClipMarked(strings.ToValidUTF8(s, "\uFFFD"), n)
}
