package alerts

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// MaxBody bounds a notification's body (Alertmanager's are a few KiB per alert; it truncates
// long groups itself, truncatedAlerts).
const MaxBody = 1 << 20

// Notifier handles an authenticated, well-formed notification (Triggers).
type Notifier interface {
	Notify(ctx context.Context, receiver string, n *Notification) (Outcome, error)
}

// Options configures Handler.
type Options struct {
	Config   func() *config.Config     // the config in force, read at each notification
	Notifier Notifier                  // required
	Getenv   func(string) string       // reads token_env/password_env (default os.Getenv)
	Observer scheduler.TriggerObserver // counts refused notifications (nil: none)
	Logger   *slog.Logger              // default discards
	MaxBody  int64                     // default MaxBody
}

// Handler serves POST /hooks/alertmanager/{name}. Mount it outside any authentication
// middleware: the receiver's credentials are the authentication.
func Handler(o Options) http.Handler {
	if o.Notifier == nil || o.Config == nil {
		panic("alerts: Options.Notifier and Options.Config are required")
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = MaxBody
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/alertmanager/{name}", h.serve)
	return mux
}

type handler struct{ o Options }

type reply struct {
	Result  string   `json:"result"`
	Message string   `json:"message,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	log := h.o.Logger.With("receiver", name)
	refuse := func(code int, msg string) {
		if h.o.Observer != nil {
			h.o.Observer.TriggerFiring("", workitems.TriggerSourceAlertmanager, workitems.TriggerRefused)
		}
		log.Warn("alertmanager notification refused: "+msg, "remote", r.RemoteAddr)
		write(w, code, reply{Result: "refused", Message: msg})
	}
	am := h.o.Config().Alertmanager
	rc, ok := am.Receivers[name]
	if !ok {
		refuse(http.StatusNotFound, fmt.Sprintf("%q is not a receiver of alertmanager.receivers", name))
		return
	}
	secret, err := rc.Secret(h.o.Getenv)
	if err != nil || secret == "" {
		if err != nil {
			log.Error("alertmanager receiver: its secret cannot be read", "err", err)
		}
		refuse(http.StatusForbidden, fmt.Sprintf("receiver %q has no secret: its token or password variable or file is empty or unreadable", name))
		return
	}
	if msg := authenticate(r, rc, secret); msg != "" {
		refuse(http.StatusUnauthorized, msg)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", h.o.MaxBody))
			return
		}
		refuse(http.StatusBadRequest, "the body could not be read")
		return
	}
	n, err := Parse(body)
	if err != nil {
		refuse(http.StatusBadRequest, strings.TrimPrefix(err.Error(), "alerts: "))
		return
	}
	out, err := h.o.Notifier.Notify(r.Context(), name, n)
	if err != nil {
		log.Error("alertmanager notification failed; Alertmanager retries", "group", n.GroupKey, "err", err)
		write(w, http.StatusServiceUnavailable, reply{Result: "error", Message: "the notification could not be processed; retry later"})
		return
	}
	log.Debug("alertmanager notification", "group", n.GroupKey, "status", n.Status, "alerts", len(n.Alerts))
	write(w, http.StatusOK, reply{Result: "accepted", Outcome: &out})
}

// authenticate checks the request's credentials against the receiver's; it returns what is
// wrong ("" when they match). Compared as hashes in constant time: neither the secret's
// content nor its length shows in the timing.
func authenticate(r *http.Request, rc config.AlertReceiver, secret string) string {
	if b := rc.BasicAuth; b != nil {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "missing basic auth (http_config.basic_auth)"
		}
		if !equal(user, b.Username) || !equal(pass, secret) {
			return "wrong basic auth username or password"
		}
		return ""
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return "missing bearer token (http_config.authorization.credentials_file)"
	}
	if !equal(strings.TrimSpace(tok), secret) {
		return "wrong bearer token"
	}
	return ""
}

func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func write(w http.ResponseWriter, code int, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}
