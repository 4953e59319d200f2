package workitems

import (
	"strings"
	"time"
	"unicode/utf8"
)

// AlertOrigin is the alert group that made an item (Origin.Alert, origin kind alert): what
// Alertmanager said in the firing notification, bounded (MaxAlertsRecorded alerts, each
// label and annotation value clipped to MaxAlertValue bytes).
type AlertOrigin struct {
	Receiver string `json:"receiver"`  // the outerloop receiver it was posted to
	GroupKey string `json:"group_key"` // Alertmanager's groupKey
	Status   string `json:"status"`    // firing
	// Alerts are the group's firing alerts (at most MaxAlertsRecorded); Truncated counts those
	// left out, Alertmanager's truncatedAlerts included.
	Alerts    []AlertFacts `json:"alerts"`
	Truncated int          `json:"truncated,omitempty"`
	// ResolvedAt is when Alertmanager said the group resolved (zero: not yet).
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
}

// AlertFacts is one alert of a group.
type AlertFacts struct {
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"starts_at,omitzero"`
	GeneratorURL string            `json:"generator_url,omitempty"`
	Fingerprint  string            `json:"fingerprint,omitempty"`
}

// Bounds of an AlertOrigin.
const (
	MaxAlertsRecorded = 20
	MaxAlertValue     = 2 << 10
	MaxAlertPairs     = 64 // labels or annotations per alert
)

// Name is the alert's alertname label.
func (a AlertFacts) Name() string { return a.Labels["alertname"] }

// Bounded returns a copy of a within the bounds: values clipped, at most MaxAlertPairs pairs
// per map (which pairs are kept past that is arbitrary: Alertmanager sends few).
func (a AlertFacts) Bounded() AlertFacts {
	a.Labels, a.Annotations = boundPairs(a.Labels), boundPairs(a.Annotations)
	a.GeneratorURL = clipValue(a.GeneratorURL)
	a.Fingerprint = clipValue(a.Fingerprint)
	return a
}

func boundPairs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(m), MaxAlertPairs))
	for k, v := range m {
		if len(out) == MaxAlertPairs {
			break
		}
		out[clipValue(k)] = clipValue(v)
	}
	return out
}

// clipValue cuts s to MaxAlertValue bytes at a character boundary and makes it valid UTF-8.
func clipValue(s string) string {
	if len(s) > MaxAlertValue {
		cut := MaxAlertValue
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
