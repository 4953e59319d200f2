package hooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Sink consumes normalised events; its owner decides what they mean. Handle runs while the
// forge waits for the answer (Gitea gives up after its DELIVER_TIMEOUT, 5 s by default; GitHub
// after 10 s), so it should record the event and return. An error answers 503 and forgets the
// delivery id, so the forge's redelivery is processed again: a Sink must tolerate seeing an
// event twice.
type Sink interface {
	Handle(ctx context.Context, e Event) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, e Event) error

// Handle calls f.
func (f SinkFunc) Handle(ctx context.Context, e Event) error { return f(ctx, e) }

// Forge is one entry of forges: as the handler needs it.
type Forge struct {
	Kind workitems.ForgeKind
	// Secret returns the shared secret the forge signs with, read at each delivery (so a
	// rotated secret applies without a restart). nil: the forge has no webhook_secret_env and
	// its deliveries are refused.
	Secret func() string
}

// FromConfig builds the handler's forges from forges:, reading each webhook_secret_env through
// getenv (os.Getenv when nil) at each delivery.
func FromConfig(forges map[string]config.ForgeConfig, getenv func(string) string) map[string]Forge {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := make(map[string]Forge, len(forges))
	for name, fc := range forges {
		f := Forge{Kind: fc.Kind}
		if env := fc.WebhookSecretEnv; env != "" {
			f.Secret = func() string { return getenv(env) }
		}
		out[name] = f
	}
	return out
}

// Result is how a delivery was answered.
type Result string

// The results.
const (
	ResultAccepted      Result = "accepted"       // 200: the sink took the event
	ResultDuplicate     Result = "duplicate"      // 200: the delivery id was seen before; the sink was not called
	ResultIgnored       Result = "ignored"        // 200/202: ping, an event or action outerloop does not use, or a payload it could not read
	ResultBadSignature  Result = "bad_signature"  // 401: missing or wrong signature
	ResultUnknownForge  Result = "unknown_forge"  // 404: {forge} is not a key of forges:
	ResultNotConfigured Result = "not_configured" // 403: the forge has no webhook secret
	ResultTooLarge      Result = "too_large"      // 413: the body is larger than MaxBody
	ResultSinkError     Result = "sink_error"     // 503: the sink failed; the id was forgotten
	ResultStoreError    Result = "store_error"    // 503: the Seen store failed; the sink was not called
)

// AllResults lists every result.
func AllResults() []Result {
	return []Result{ResultAccepted, ResultDuplicate, ResultIgnored, ResultBadSignature, ResultUnknownForge,
		ResultNotConfigured, ResultTooLarge, ResultSinkError, ResultStoreError}
}

// Observer is told the outcome of every delivery (metrics). forge is "" when {forge} is not a
// key of forges:; kind is "" when the delivery gave no event.
type Observer interface {
	Delivery(forge string, kind Kind, r Result)
}

// DefaultMaxBody is the largest body accepted unless Options.MaxBody says otherwise.
const DefaultMaxBody = 5 << 20

// Options configures Handler.
type Options struct {
	// Forges are the forges by key (FromConfig builds them from forges:).
	Forges map[string]Forge
	// Sink receives the events. Required.
	Sink Sink
	// Seen deduplicates deliveries by id; nil processes every delivery.
	Seen Seen
	// Observer is told every outcome; nil tells no one.
	Observer Observer
	Logger   *slog.Logger    // default discards
	Clock    workitems.Clock // stamps Event.Received; default the system clock
	// MaxBody is the largest body read; a larger one answers 413 (default DefaultMaxBody).
	MaxBody int64
}

func (o *Options) withDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	o.MaxBody = cmp.Or(o.MaxBody, DefaultMaxBody)
}

// unmarkTimeout bounds forgetting a delivery id after the sink failed (the request's context may
// be gone by then).
const unmarkTimeout = 5 * time.Second

// Handler serves POST /hooks/{forge}: it checks the delivery's signature with the forge's
// secret, normalises the payload into an Event, drops a delivery id seen before and hands the
// event to the sink. Other methods answer 405, other paths 404. Mount it at "/hooks/" of the
// server's mux, outside any authentication middleware: the signature is the authentication.
func Handler(o Options) http.Handler {
	o.withDefaults()
	if o.Sink == nil {
		panic("hooks: Options.Sink is required")
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{forge}", h.serve)
	return mux
}

type handler struct{ o Options }

// reply is the JSON body of every answer.
type reply struct {
	Result  Result `json:"result"`
	Kind    Kind   `json:"kind,omitempty"`
	Message string `json:"message,omitempty"`
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("forge")
	log := h.o.Logger.With("forge", name)
	f, ok := h.o.Forges[name]
	if !ok {
		h.answer(w, "", http.StatusNotFound, reply{Result: ResultUnknownForge,
			Message: fmt.Sprintf("%q is not a key of forges:", name)})
		log.Warn("webhook for an unknown forge")
		return
	}
	secret := ""
	if f.Secret != nil {
		secret = f.Secret()
	}
	if secret == "" {
		msg := fmt.Sprintf("webhooks are not configured for this forge: set forges.%s.webhook_secret_env to the name of the environment variable holding the hook's secret", name)
		if f.Secret != nil {
			msg = fmt.Sprintf("webhooks are not configured for this forge: the variable named by forges.%s.webhook_secret_env is empty", name)
		}
		h.answer(w, name, http.StatusForbidden, reply{Result: ResultNotConfigured, Message: msg})
		log.Warn("webhook refused: " + msg)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			h.answer(w, name, http.StatusRequestEntityTooLarge, reply{Result: ResultTooLarge,
				Message: fmt.Sprintf("the body is larger than %d bytes", h.o.MaxBody)})
			log.Warn("webhook refused: body too large", "limit", h.o.MaxBody)
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Too slow: the server's body deadline passed (api.BoundBodies).
			log.Warn("webhook refused: body not received in time", "remote", r.RemoteAddr)
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		// The forge hung up mid-body: nobody reads the answer.
		log.Warn("webhook body unreadable", "err", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !verify(f.Kind, []byte(secret), body, r.Header) {
		h.answer(w, name, http.StatusUnauthorized, reply{Result: ResultBadSignature,
			Message: "missing or wrong signature"})
		log.Warn("webhook refused: missing or wrong signature", "remote", r.RemoteAddr)
		return
	}
	d := readDelivery(f.Kind, r.Header)
	log = log.With("event", d.event, "delivery", d.id)
	if d.event == "ping" {
		h.answer(w, name, http.StatusOK, reply{Result: ResultIgnored, Message: "pong"})
		log.Info("webhook ping")
		return
	}
	e, err := parse(f.Kind, d.event, body)
	if err != nil {
		// A payload the forge signed but that does not read: a 4xx would get the hook disabled.
		h.answer(w, name, http.StatusAccepted, reply{Result: ResultIgnored, Message: "payload not understood"})
		log.Warn("webhook payload not understood", "err", err)
		return
	}
	if e == nil {
		h.answer(w, name, http.StatusAccepted, reply{Result: ResultIgnored, Message: "event not used"})
		log.Debug("webhook ignored")
		return
	}
	e.Forge, e.DeliveryID, e.Received = name, d.id, h.o.Clock.Now()
	if d.id == "" {
		log.Warn("webhook delivery without an id: processed without deduplication")
	}
	marked := false
	if d.id != "" && h.o.Seen != nil {
		first, err := h.o.Seen.Mark(r.Context(), name, d.id)
		if err != nil {
			h.answer(w, name, http.StatusServiceUnavailable, reply{Result: ResultStoreError, Kind: e.Kind,
				Message: "could not record the delivery; redeliver later"})
			log.Error("webhook: marking the delivery failed", "err", err)
			return
		}
		if !first {
			h.observe(name, e.Kind, ResultDuplicate)
			writeReply(w, http.StatusOK, reply{Result: ResultDuplicate, Kind: e.Kind, Message: "delivery already processed"})
			log.Info("webhook duplicate delivery")
			return
		}
		marked = true
	}
	if err := callSink(r.Context(), h.o.Sink, *e); err != nil {
		if marked {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), unmarkTimeout)
			if uerr := h.o.Seen.Unmark(ctx, name, d.id); uerr != nil {
				log.Error("webhook: forgetting the delivery after the sink failed did not work: its redelivery will count as a duplicate",
					"err", uerr)
			}
			cancel()
		}
		h.observe(name, e.Kind, ResultSinkError)
		writeReply(w, http.StatusServiceUnavailable, reply{Result: ResultSinkError, Kind: e.Kind,
			Message: "the event could not be processed; redeliver later"})
		log.Error("webhook sink failed", "kind", e.Kind, "err", err)
		return
	}
	h.observe(name, e.Kind, ResultAccepted)
	writeReply(w, http.StatusOK, reply{Result: ResultAccepted, Kind: e.Kind})
	log.Debug("webhook accepted", "kind", e.Kind, "repo", e.Repo)
}

// answer counts and writes an answer that carries no event.
func (h *handler) answer(w http.ResponseWriter, forge string, code int, rep reply) {
	h.observe(forge, rep.Kind, rep.Result)
	writeReply(w, code, rep)
}

func (h *handler) observe(forge string, kind Kind, r Result) {
	if h.o.Observer != nil {
		h.o.Observer.Delivery(forge, kind, r)
	}
}

func writeReply(w http.ResponseWriter, code int, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}

// callSink calls the sink; a panic is its error (the delivery id must still be forgotten).
func callSink(ctx context.Context, s Sink, e Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("hooks: the sink panicked: %v", p)
		}
	}()
	return s.Handle(ctx, e)
}
