// Package alerts receives Alertmanager's webhook notifications and makes items of the
// templates that subscribe to them (a template's triggers: alertmanager: entries).
//
// Handler serves POST /hooks/alertmanager/{name}: {name} is a receiver of the deployment's
// alertmanager: config, which says how Alertmanager authenticates (a bearer token or basic
// auth; compared in constant time). A notification that does not authenticate, is larger than
// MaxBody, is not JSON or is not version "4" is answered 4xx naming what is wrong, stores
// nothing, and is counted as a refused firing.
//
// Triggers turns an accepted notification into items: a firing group makes one item of each
// template one of whose triggers matches one of its firing alerts, with a deterministic id
// (workitems.AlertTriggerItemID) created through scheduler.Queue.SubmitTriggered, so
// Alertmanager's repeat notifications and several replicas make it once and max_per_hour
// applies. A resolved notification of the group cancels its items still queued and tells the
// others' next attempt (itemstore.AlertResolved), found through a group → items index in Redis.
// docs/triggers.md ("Alertmanager") is the operator's side.
package alerts
