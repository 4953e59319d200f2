package workitems

// TriggerSource is what a trigger listens to: a template's triggers: entry is one of these
// (workitems/config: Trigger). It is the source label of outerloop_trigger_firings_total.
type TriggerSource string

// The trigger sources.
const (
	// TriggerSourceForge: a forge's webhook (check_failed, labeled), POST /hooks/{forge}.
	TriggerSourceForge TriggerSource = "forge"
	// TriggerSourceAlertmanager: an Alertmanager notification, POST /hooks/alertmanager/{name}.
	TriggerSourceAlertmanager TriggerSource = "alertmanager"
	// TriggerSourceAPI: any caller with the template's secret, POST /api/templates/{name}/trigger.
	TriggerSourceAPI TriggerSource = "api"
)

// AllTriggerSources lists every TriggerSource.
func AllTriggerSources() []TriggerSource {
	return []TriggerSource{TriggerSourceForge, TriggerSourceAlertmanager, TriggerSourceAPI}
}

// TriggerResult is what became of one firing of a trigger: the result label of
// outerloop_trigger_firings_total.
type TriggerResult string

// The trigger results.
const (
	TriggerMade         TriggerResult = "made"         // an item was made
	TriggerDeduplicated TriggerResult = "deduplicated" // the item it names exists: a repeat, a replica, a retried request
	TriggerCapped       TriggerResult = "capped"       // a limit refused it (max_per_hour, max_open, the daily cost cap)
	TriggerPaused       TriggerResult = "paused"       // the template is paused
	TriggerRefused      TriggerResult = "refused"      // unauthenticated, malformed, oversized or replayed: nothing stored
)

// AllTriggerResults lists every TriggerResult.
func AllTriggerResults() []TriggerResult {
	return []TriggerResult{TriggerMade, TriggerDeduplicated, TriggerCapped, TriggerPaused, TriggerRefused}
}
