// Package notify owns outerloop's notifications: telling people about the events that need
// them (an item escalated, an item failed for good, a template's daily cost cap reached) through
// the sinks of the `notify:` section — generic webhooks (a signed JSON body) and Slack-compatible
// incoming webhooks.
//
// A sink kind is a Sink (sink.go) registered by kind in the Registry a Dispatcher is given:
// BuiltinSinks holds the webhook and slack kinds, and a process registers more next to them.
// The dispatcher looks each delivery's sink up by its configured kind; the same Registry is a
// config.SinkRegistry, so config validation (config.Kinds) accepts exactly the kinds the
// process registered.
//
// It owns an outbox in Redis (keys.go, under the store's prefix) and the dispatcher that empties
// it. An escalation or failure is put in the outbox inside the same MULTI as the item's
// transition (Outbox.TransitionHook, installed on the store), so an escalated item always has its
// notification queued and a transition that did not commit queues none. A daily cap is noticed
// when the store refuses an item for it; that refusal writes nothing, so its notification is
// queued right after, once per template and UTC day.
//
// One notification becomes one delivery per sink; each delivery moves through
//
//	pending ──claim──► inflight ──2xx──► delivered (kept 7 days)
//	   ▲                 │  │
//	   └──error/backoff──┘  └──error on the last attempt──► dead (kept, listed, re-queued by hand)
//	   ▲                 │
//	   └──release────────┘  (a dispatcher shutting down mid-request)
//
// and an inflight delivery whose dispatcher died is claimed again once its visibility timeout
// passed (counting as an attempt). Every move is one Lua script, so any number of dispatchers
// (each serve and worker process runs one) share the outbox: a delivery is claimed by one at a
// time, so each is normally sent once; it is sent again only when a dispatcher lost its claim
// (crashed or stalled past the visibility timeout) or the receiver's answer was lost. Delivery is
// therefore at-least-once: receivers deduplicate by the X-Outerloop-Event-Id header, which is the
// same for every retry of an event (and for all its sinks).
//
// Retries wait an exponential backoff with jitter (Backoff), read from the injected clock.
// Secrets — a webhook's signing key and a URL given by url_env — are read from the environment
// at each delivery and never written to Redis, logs, errors or metrics: a delivery names its
// sink, not its URL.
package notify
