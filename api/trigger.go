package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// The trigger endpoint: POST /api/templates/{name}/trigger makes an item of a template that has
// an api trigger (triggers: [- api: {secret_env: VAR}]) for any caller holding the template's
// own secret — not the API's tokens: a monitoring system, a CI job or a chat bot gets the power
// to start one template, nothing else (docs/triggers.md, "The trigger endpoint").
//
// The caller proves the secret one of two ways:
//
//   - Authorization: Bearer <secret>;
//   - X-Outerloop-Timestamp: <unix seconds> and X-Outerloop-Signature: sha256=<hex of
//     HMAC-SHA256(secret, timestamp + "." + body)>. A timestamp more than TriggerWindow from the
//     server's clock is refused, and so is a signature seen before (kept in Redis until its
//     timestamp leaves the window), so a captured request cannot be replayed.
//
// The body is a JSON object of fields (checkFields says which); the template's goal may use
// them (text/template), and the first attempt's input lists them.

// Headers of the trigger endpoint.
const (
	TimestampHeader   = "X-Outerloop-Timestamp"
	SignatureHeader   = "X-Outerloop-Signature"
	IdempotencyHeader = "Idempotency-Key"
)

// Bounds of a trigger request.
const (
	// TriggerWindow is how far a signed request's timestamp may be from the server's clock,
	// either way; signatures are remembered for as long.
	TriggerWindow = 5 * time.Minute
	// MaxTriggerFields bounds the fields of a body, and the members of one object or array field.
	MaxTriggerFields = 64
	// MaxTriggerString bounds one string value, in bytes.
	MaxTriggerString = 8 << 10
	// MaxIdempotencyKey bounds an idempotency key, in characters.
	MaxIdempotencyKey = 200
	// MaxTriggerGoal bounds a goal rendered with the fields, in bytes.
	MaxTriggerGoal = 8 << 10
)

// TriggerObserver counts the trigger endpoint's requests by what became of them
// (metrics.Metrics). template is the path's name, configured or not.
type TriggerObserver interface {
	TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult)
}

// idempotencyField is the body field that may carry the idempotency key (not a field of the item).
const idempotencyField = "idempotency_key"

var fieldNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// triggerSeenKey is the Redis key remembering a signature of template's trigger (replays): the
// one place it is built.
func triggerSeenKey(prefix, template, sig string) string {
	return prefix + "trigger:sig:" + template + ":" + sig
}

// TriggerAnswer is the body of a trigger's success: the item made, or the one its idempotency
// key made before.
type TriggerAnswer struct {
	Item         string `json:"item"`
	Deduplicated bool   `json:"deduplicated"`
}

// triggerCall is one request to the endpoint as it is checked.
type triggerCall struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	template string
}

// refuse answers an error that stored nothing and counts it as result.
func (c *triggerCall) refuse(code int, result workitems.TriggerResult, format string, args ...any) {
	c.count(result)
	if code == http.StatusUnauthorized {
		c.w.Header().Set("WWW-Authenticate", `Bearer realm="outerloop-trigger"`)
	}
	writeErr(c.w, code, format, args...)
}

func (c *triggerCall) count(result workitems.TriggerResult) {
	if c.s.o.Triggers != nil {
		c.s.o.Triggers.TriggerFiring(c.template, workitems.TriggerSourceAPI, result)
	}
}

func (s *Server) trigger(w http.ResponseWriter, r *http.Request) {
	c := &triggerCall{s: s, w: w, r: r, template: r.PathValue("name")}
	log := s.o.Logger.With("template", c.template, "via", "trigger")
	t, ok := s.o.Queue.Config().Template(c.template)
	if !ok {
		c.refuse(http.StatusNotFound, workitems.TriggerRefused, "template %q is not configured", c.template)
		return
	}
	at, ok := t.APITrigger()
	if !ok {
		c.refuse(http.StatusNotFound, workitems.TriggerRefused,
			"template %q has no api trigger: add `- api: {secret_env: VAR}` to its triggers to call it here", c.template)
		return
	}
	secret, err := at.Secret(s.o.Getenv)
	if err != nil {
		// The error names the variable or file, never a value.
		log.Warn("trigger refused: the template's secret is not set", "err", err)
		c.refuse(http.StatusServiceUnavailable, workitems.TriggerRefused, "template's trigger secret is not set")
		return
	}
	if r.ContentLength > MaxBody {
		c.count(workitems.TriggerRefused)
		tooLarge(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = errTooLarge
		}
		c.refuse(decodeStatus(err), workitems.TriggerRefused, "%v", err)
		return
	}
	how, sig, err := c.authenticate(secret, body)
	if err != nil {
		log.Info("trigger refused", "err", err, "remote", ClientIP(r))
		c.refuse(http.StatusUnauthorized, workitems.TriggerRefused, "%v", err)
		return
	}
	AuditPrincipal(r.Context(), Principal{Actor: "trigger:" + string(how), Credential: "template " + c.template + " trigger secret"})
	fields, key, err := parseTriggerBody(body, r.Header.Get(IdempotencyHeader))
	if err != nil {
		c.refuse(http.StatusBadRequest, workitems.TriggerRefused, "%v", err)
		return
	}
	goal, err := renderGoal(t.Goal, fields)
	if err != nil {
		c.refuse(http.StatusBadRequest, workitems.TriggerRefused, "%v", err)
		return
	}
	if sig != "" {
		// Only a request that passed every other check uses its signature up: the caller may
		// correct a malformed body, which changes the signature anyway.
		first, err := c.markSignature(sig)
		if err != nil {
			log.Error("trigger: recording the signature failed", "err", err)
			writeErr(w, http.StatusServiceUnavailable, "the request could not be recorded; try again")
			return
		}
		if !first {
			log.Info("trigger refused: a replayed signature", "remote", ClientIP(r))
			c.refuse(http.StatusUnauthorized, workitems.TriggerRefused, "this signature was used before: sign each request anew (a fresh timestamp)")
			return
		}
	}
	p, err := s.o.Queue.PauseOf(r.Context(), t.Name)
	if err != nil {
		c.unmark(sig)
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if p != nil {
		c.refuse(http.StatusConflict, workitems.TriggerPaused, "template %q is paused (by %s): no item made; resume it to trigger it", t.Name, p.Actor)
		return
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	req := scheduler.Request{Template: t.Name, Goal: goal, Input: triggerInput(how, names, fields),
		Origin: workitems.Origin{Kind: workitems.OriginAPI, Actor: "api",
			Caller: &workitems.CallerOrigin{Auth: how, IdempotencyKey: key, Fields: names}}}
	if key != "" {
		req.ID = workitems.APITriggerItemID(t.Name, key)
	}
	AuditAction(r.Context(), "trigger", t.Name)
	it, err := s.o.Queue.SubmitTriggered(r.Context(), req, workitems.TriggerSourceAPI)
	switch {
	case err == nil:
		c.count(workitems.TriggerMade)
		log.Info("trigger: item created", "item", it.ID, "auth", how)
		writeJSON(w, http.StatusCreated, TriggerAnswer{Item: it.ID})
	case errors.Is(err, workitems.ErrExists):
		c.count(workitems.TriggerDeduplicated)
		log.Debug("trigger: item exists", "item", req.ID)
		writeJSON(w, http.StatusOK, TriggerAnswer{Item: req.ID, Deduplicated: true})
	case errors.Is(err, itemstore.ErrMaxOpen), errors.Is(err, itemstore.ErrDailyCap), errors.Is(err, scheduler.ErrTriggerCapped):
		c.refuse(http.StatusTooManyRequests, workitems.TriggerCapped, "a limit of template %q refused the item: %v", t.Name, err)
	case errors.Is(err, scheduler.ErrUnknownTemplate):
		c.refuse(http.StatusNotFound, workitems.TriggerRefused, "%v", err)
	case workitems.ClassOf(err) == workitems.ClassInvalidInput:
		c.refuse(http.StatusBadRequest, workitems.TriggerRefused, "%v", err)
	default:
		c.unmark(sig)
		log.Error("trigger: the item could not be made", "err", err)
		writeErr(w, http.StatusInternalServerError, "%v", err)
	}
}

// authenticate checks the caller's proof of secret: an HMAC signature when the request has
// one, else a bearer token. sig is the signature to remember against replays ("" for bearer).
func (c *triggerCall) authenticate(secret string, body []byte) (how workitems.CallerAuth, sig string, err error) {
	h := c.r.Header
	if h.Get(SignatureHeader) != "" || h.Get(TimestampHeader) != "" {
		sig, err := c.checkSignature(secret, body)
		return workitems.CallerHMAC, sig, err
	}
	bearer, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(bearer) == "" {
		return "", "", fmt.Errorf("no credentials: send Authorization: Bearer <the template's secret>, or %s and %s", TimestampHeader, SignatureHeader)
	}
	// Hashing both sides makes the comparison's time independent of the lengths too.
	got, want := sha256.Sum256([]byte(strings.TrimSpace(bearer))), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return "", "", errors.New("the bearer token is not this template's trigger secret")
	}
	return workitems.CallerBearer, "", nil
}

// checkSignature verifies X-Outerloop-Signature over the timestamp and the body, and the
// timestamp's distance from the server's clock. It returns the signature's hex digits.
func (c *triggerCall) checkSignature(secret string, body []byte) (string, error) {
	ts, sigHeader := c.r.Header.Get(TimestampHeader), c.r.Header.Get(SignatureHeader)
	if ts == "" || sigHeader == "" {
		return "", fmt.Errorf("a signed request needs both %s and %s", TimestampHeader, SignatureHeader)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s %q: want unix seconds", TimestampHeader, ts)
	}
	if d := c.s.clock().Now().Sub(time.Unix(sec, 0)); d > TriggerWindow || d < -TriggerWindow {
		return "", fmt.Errorf("%s is more than %s from the server's time (stale or in the future): sign with the current time", TimestampHeader, TriggerWindow)
	}
	hexSig, ok := strings.CutPrefix(sigHeader, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(got) != sha256.Size {
		return "", fmt.Errorf("%s: want sha256=<64 hex digits>", SignatureHeader)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return "", fmt.Errorf("%s does not match: HMAC-SHA256 with the template's secret over %s + \".\" + the body", SignatureHeader, TimestampHeader)
	}
	return strings.ToLower(hexSig), nil
}

// markSignature remembers sig until its timestamp leaves the window; false: it was there.
func (c *triggerCall) markSignature(sig string) (bool, error) {
	sec, _ := strconv.ParseInt(c.r.Header.Get(TimestampHeader), 10, 64)
	k := triggerSeenKey(c.s.store.Prefix(), c.template, sig)
	// Relative to the server's clock (which the timestamp was checked against), not Redis's.
	ttl := time.Unix(sec, 0).Add(TriggerWindow + time.Second).Sub(c.s.clock().Now())
	err := c.s.store.Redis().SetArgs(c.r.Context(), k, "1", redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// unmark forgets a signature whose request failed for the server's reasons, so that the caller's
// retry of it is not a replay.
func (c *triggerCall) unmark(sig string) {
	if sig == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), 2*time.Second)
	defer cancel()
	if err := c.s.store.Redis().Del(ctx, triggerSeenKey(c.s.store.Prefix(), c.template, sig)).Err(); err != nil {
		c.s.o.Logger.Warn("trigger: forgetting a signature failed: the caller's retry will be refused as a replay",
			"template", c.template, "err", err)
	}
}

// parseTriggerBody reads the body's fields and the idempotency key (the header, or the body's
// idempotency_key field; both must then agree). An empty body has no fields.
//
// Fields: at most MaxTriggerFields, named by fieldNameRE; a value is a string (at most
// MaxTriggerString bytes), a number or a bool, or one object or array of those (at most
// MaxTriggerFields members, object keys of 1 to 64 printable characters). Not null, nor
// anything deeper: the fields go into a goal and an input, where a tree of JSON says nothing a
// person reads.
func parseTriggerBody(body []byte, header string) (map[string]any, string, error) {
	fields := map[string]any{}
	if len(bytes.TrimSpace(body)) > 0 {
		if !utf8.Valid(body) {
			return nil, "", errors.New("body is not valid UTF-8")
		}
		if at := loneSurrogate(body); at >= 0 {
			return nil, "", fmt.Errorf("body has an unpaired UTF-16 surrogate escape at byte %d", at)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, "", fmt.Errorf("body is not JSON: %w", err)
		}
		if dec.More() {
			return nil, "", errors.New("body has data after the JSON object")
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", errors.New("body is not a JSON object of fields")
		}
		fields = m
	}
	key := strings.TrimSpace(header)
	if v, ok := fields[idempotencyField]; ok {
		s, isStr := v.(string)
		if !isStr || strings.TrimSpace(s) == "" {
			return nil, "", fmt.Errorf("field %s: want a non-empty string", idempotencyField)
		}
		if key != "" && key != strings.TrimSpace(s) {
			return nil, "", fmt.Errorf("field %s and the %s header differ: send one", idempotencyField, IdempotencyHeader)
		}
		key = strings.TrimSpace(s)
		delete(fields, idempotencyField)
	}
	if utf8.RuneCountInString(key) > MaxIdempotencyKey || strings.ContainsFunc(key, unicode.IsControl) {
		return nil, "", fmt.Errorf("idempotency key: want at most %d printable characters", MaxIdempotencyKey)
	}
	if len(fields) > MaxTriggerFields {
		return nil, "", fmt.Errorf("body has %d fields: at most %d", len(fields), MaxTriggerFields)
	}
	for name, v := range fields {
		if !fieldNameRE.MatchString(name) {
			return nil, "", fmt.Errorf("field %q: a name is a lower-case letter, then up to 63 of a-z, 0-9 and _", name)
		}
		if err := checkValue(v, true); err != nil {
			return nil, "", fmt.Errorf("field %s: %w", name, err)
		}
	}
	return fields, key, nil
}

// checkValue checks one field's value; nest allows one level of object or array.
func checkValue(v any, nest bool) error {
	switch x := v.(type) {
	case string:
		if len(x) > MaxTriggerString {
			return fmt.Errorf("a string of %d bytes: at most %d", len(x), MaxTriggerString)
		}
	case json.Number, bool:
	case nil:
		return errors.New("null: leave the field out instead")
	case []any:
		if !nest {
			return errors.New("too deep: an array's members are strings, numbers or bools")
		}
		if len(x) > MaxTriggerFields {
			return fmt.Errorf("an array of %d members: at most %d", len(x), MaxTriggerFields)
		}
		for i, m := range x {
			if err := checkValue(m, false); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		if !nest {
			return errors.New("too deep: an object's members are strings, numbers or bools")
		}
		if len(x) > MaxTriggerFields {
			return fmt.Errorf("an object of %d members: at most %d", len(x), MaxTriggerFields)
		}
		for k, m := range x {
			if k == "" || utf8.RuneCountInString(k) > 64 || strings.ContainsFunc(k, unicode.IsControl) {
				return fmt.Errorf("member %q: a key is 1 to 64 printable characters", k)
			}
			if err := checkValue(m, false); err != nil {
				return fmt.Errorf(".%s: %w", k, err)
			}
		}
	}
	return nil
}

// renderGoal fills a goal holding {{ … }} with the fields (text/template, a missing field is
// empty); a goal without them is used as it is.
func renderGoal(goal string, fields map[string]any) (string, error) {
	if !strings.Contains(goal, "{{") {
		return "", nil // the template's goal
	}
	tm, err := template.New("goal").Option("missingkey=zero").Parse(goal)
	if err != nil {
		return "", fmt.Errorf("goal: the template's goal is not a valid template: %w", err)
	}
	var b bytes.Buffer
	if err := tm.Execute(&limitWriter{w: &b, n: MaxTriggerGoal}, fields); err != nil {
		return "", fmt.Errorf("goal: the template's goal could not be filled with these fields: %w", err)
	}
	// missingkey=zero on a map of interfaces prints a missing field as "<no value>".
	out := strings.TrimSpace(strings.ReplaceAll(b.String(), "<no value>", ""))
	if out == "" {
		return "", errors.New("goal: filled with these fields, the template's goal is empty")
	}
	return out, nil
}

// limitWriter fails a write past n bytes (a goal is bounded).
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, fmt.Errorf("the goal would be longer than %d bytes", MaxTriggerGoal)
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// triggerInput is the first attempt's input: the fields, one a line (objects and arrays as
// JSON, a string of several lines indented under its name). Its size is bounded by the body's.
func triggerInput(how workitems.CallerAuth, names []string, fields map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A caller of this template's trigger endpoint (authenticated by %s) started this item", how)
	if len(names) == 0 {
		b.WriteString(" without fields.\n")
		return b.String()
	}
	b.WriteString(" with these fields:\n\n")
	for _, k := range names {
		switch v := fields[k].(type) {
		case string:
			if strings.Contains(v, "\n") {
				fmt.Fprintf(&b, "%s:\n    %s\n", k, strings.ReplaceAll(v, "\n", "\n    "))
			} else {
				fmt.Fprintf(&b, "%s: %s\n", k, v)
			}
		case json.Number, bool:
			fmt.Fprintf(&b, "%s: %v\n", k, v)
		default:
			j, _ := json.Marshal(v)
			fmt.Fprintf(&b, "%s: %s\n", k, j)
		}
	}
	return b.String()
}

// isTriggerPath reports whether r is a call of the trigger endpoint, which the template's
// secret authenticates: Protect does not read its bearer token as one of the API's.
func isTriggerPath(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/templates/")
	name, ok2 := strings.CutSuffix(rest, "/trigger")
	return r.Method == http.MethodPost && ok && ok2 && name != "" && !strings.Contains(name, "/")
}
