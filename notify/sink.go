package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"outerloop/workitems"
)

// The headers of a delivery.
const (
	// HeaderSignature carries "sha256=" + hex(HMAC-SHA256(secret, body)) (webhooks only).
	HeaderSignature = "X-Outerloop-Signature"
	// HeaderEventID is the notification's id: the same for every retry, for deduplication.
	HeaderEventID = "X-Outerloop-Event-Id"
	// HeaderEvent is the event kind (escalation, failure, daily_cap).
	HeaderEvent = "X-Outerloop-Event"
	// HeaderAttempt is the delivery attempt, from 1.
	HeaderAttempt = "X-Outerloop-Delivery-Attempt"
)

// Sign returns the signature header's value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is body's signature under secret (constant time): what a
// receiver does.
func Verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// sinkSecrets resolves a sink's URL and signing secret from config and environment; the error
// names the sink and the variable, never a value.
func sinkSecrets(name string, s workitems.NotifySink, getenv func(string) string) (string, []byte, error) {
	u := s.URL
	if s.URLEnv != "" {
		u = getenv(s.URLEnv)
		if u == "" {
			return "", nil, fmt.Errorf("notify: sink %q: url_env %s is not set", name, s.URLEnv)
		}
		if err := workitems.ValidateSinkURL(u); err != nil {
			return "", nil, fmt.Errorf("notify: sink %q: the URL in %s: %w", name, s.URLEnv, err)
		}
	}
	var secret []byte
	if s.Kind == workitems.SinkWebhook {
		v := getenv(s.SecretEnv)
		if v == "" {
			return "", nil, fmt.Errorf("notify: sink %q: secret_env %s is not set", name, s.SecretEnv)
		}
		secret = []byte(v)
	}
	return u, secret, nil
}

// errorBodyBytes bounds how much of a refusing sink's answer is kept in last_error.
const errorBodyBytes = 200

// send makes one HTTP attempt of d to its sink.
func send(ctx context.Context, hc *http.Client, name string, s workitems.NotifySink, getenv func(string) string, d Delivery) error {
	u, secret, err := sinkSecrets(name, s, getenv)
	if err != nil {
		return err
	}
	var body []byte
	switch s.Kind {
	case workitems.SinkSlack:
		body, err = slackBody(d.Notification)
	default:
		body, err = webhookBody(d.Notification)
	}
	if err != nil {
		return fmt.Errorf("notify: sink %q: %w", name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: sink %q: bad request", name) // the URL may be a secret: not repeated
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "outerloop-notify")
	req.Header.Set(HeaderEventID, d.Notification.ID)
	req.Header.Set(HeaderEvent, string(d.Event))
	req.Header.Set(HeaderAttempt, fmt.Sprint(d.Attempts+1))
	if secret != nil {
		req.Header.Set(HeaderSignature, Sign(secret, body))
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL
		}
		return fmt.Errorf("notify: sink %q: %w", name, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "?"))
		if msg != "" {
			msg = ": " + msg
		}
		return fmt.Errorf("notify: sink %q answered %s%s", name, resp.Status, msg)
	}
	return nil
}
