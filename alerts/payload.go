package alerts

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Version is the only webhook payload version understood (Alertmanager's since 0.x: "4").
const Version = "4"

// Status is a group's or an alert's status in a notification.
type Status string

// The statuses.
const (
	StatusFiring   Status = "firing"
	StatusResolved Status = "resolved"
)

// AllStatuses lists every Status.
func AllStatuses() []Status { return []Status{StatusFiring, StatusResolved} }

// Notification is Alertmanager's webhook payload, version 4.
type Notification struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            Status            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       Status            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Parse reads a notification, refusing one that is not JSON, not version 4, or lacks its
// group key or a known status.
func Parse(body []byte) (*Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("alerts: the body is not an Alertmanager notification (JSON): %w", err)
	}
	if n.Version != Version {
		return nil, fmt.Errorf("alerts: version %q is not %q (Alertmanager's webhook payload version)", n.Version, Version)
	}
	if n.GroupKey == "" {
		return nil, fmt.Errorf("alerts: groupKey missing")
	}
	if !slices.Contains(AllStatuses(), n.Status) {
		return nil, fmt.Errorf("alerts: status %q is not firing or resolved", n.Status)
	}
	return &n, nil
}

// Firing returns the notification's firing alerts.
func (n *Notification) Firing() []Alert {
	var out []Alert
	for _, a := range n.Alerts {
		if a.Status == StatusFiring {
			out = append(out, a)
		}
	}
	return out
}

// ResolvedAt is when the group resolved: the latest endsAt of its alerts (zero: none says).
func (n *Notification) ResolvedAt() time.Time {
	var at time.Time
	for _, a := range n.Alerts {
		if a.EndsAt.After(at) {
			at = a.EndsAt
		}
	}
	return at
}
