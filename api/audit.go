package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// AuditResult is how an audited request ended.
type AuditResult string

// Audit results.
const (
	AuditOK      AuditResult = "ok"      // 2xx or 3xx: done
	AuditRefused AuditResult = "refused" // 4xx: refused, nothing changed
	AuditError   AuditResult = "error"   // 5xx: failed
)

// AuditVia is the door a request came through.
type AuditVia string

// Doors.
const (
	ViaAPI     AuditVia = "api"     // /api/*
	ViaConsole AuditVia = "console" // the console's forms and login
	ViaQueues  AuditVia = "queues"  // asynqmon at /queues
	ViaCLI     AuditVia = "cli"     // the outerloop command, straight to Redis
	ViaForge   AuditVia = "forge"   // an /outerloop command in a pull request's conversation
)

// AuditEntry is one person's (or system's) action. It never holds a token: only the name of
// the credential that proved the request.
type AuditEntry struct {
	// ID is the entry's stream ID, also the cursor of the page after it.
	ID         string      `json:"id"`
	At         time.Time   `json:"at"`
	Actor      string      `json:"actor"`
	Credential string      `json:"credential,omitempty"`
	Role       Role        `json:"role,omitempty"`
	Via        AuditVia    `json:"via"`
	Action     string      `json:"action"`          // resolve, steer, enqueue, login, queues:pause...
	Route      string      `json:"route,omitempty"` // the route pattern, "POST /api/items/{id}/resolve"
	Target     string      `json:"target,omitempty"`
	Result     AuditResult `json:"result"`
	Status     int         `json:"status,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	Remote     string      `json:"remote,omitempty"` // the client address
}

// DefaultAuditMax is how many entries the audit list keeps (older ones are trimmed).
const DefaultAuditMax = 100_000

// AuditLog is the audit list: a Redis stream capped at Max entries (approximate trimming in the
// same XADD), newest read first, a page per read.
type AuditLog struct {
	rdb   redis.UniversalClient
	key   string
	max   int64
	clock workitems.Clock
}

// NewAuditLog returns the audit list under prefix (the store's key prefix); max ≤ 0 takes
// DefaultAuditMax; clock (nil: the system clock) times the entries.
func NewAuditLog(rdb redis.UniversalClient, prefix string, max int64, clock workitems.Clock) *AuditLog {
	if max <= 0 {
		max = DefaultAuditMax
	}
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &AuditLog{rdb: rdb, key: auditKey(prefix), max: max, clock: clock}
}

// auditKey is the one Redis key of the audit list.
func auditKey(prefix string) string { return prefix + "audit" }

// Record appends e (its time from the clock when zero) in one XADD that also trims the list.
func (l *AuditLog) Record(ctx context.Context, e AuditEntry) error {
	if e.At.IsZero() {
		e.At = l.clock.Now()
	}
	e.At = e.At.UTC()
	e.ID = ""
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode: %w", err)
	}
	err = l.rdb.XAdd(ctx, &redis.XAddArgs{Stream: l.key, MaxLen: l.max, Approx: true, Values: []any{"e", b}}).Err()
	if err != nil {
		return fmt.Errorf("audit: record: %w", err)
	}
	return nil
}

var auditCursor = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// ErrBadCursor is a cursor that is not an entry ID.
var ErrBadCursor = errors.New("want an entry id like 1764590000000-0")

// List returns up to limit entries older than cursor ("" = the newest), newest first, and the
// cursor of the next page ("" at the end). It reads one page: XREVRANGE with COUNT.
func (l *AuditLog) List(ctx context.Context, cursor string, limit int) ([]AuditEntry, string, error) {
	end := "+"
	if cursor != "" {
		if !auditCursor.MatchString(cursor) {
			return nil, "", ErrBadCursor
		}
		end = "(" + cursor
	}
	msgs, err := l.rdb.XRevRangeN(ctx, l.key, end, "-", int64(limit)).Result()
	if err != nil {
		return nil, "", fmt.Errorf("audit: read: %w", err)
	}
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		var e AuditEntry
		s, _ := m.Values["e"].(string)
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, "", fmt.Errorf("audit: entry %s: %w", m.ID, err)
		}
		e.ID = m.ID
		out = append(out, e)
	}
	next := ""
	if len(out) == limit && limit > 0 {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Len is the number of entries kept.
func (l *AuditLog) Len(ctx context.Context) (int64, error) { return l.rdb.XLen(ctx, l.key).Result() }

// auditNote is what handlers add to the entry the Protect middleware records for their request.
type auditNote struct {
	p      *Principal
	action string
	target string
	detail string
	skip   bool
}

type auditNoteKey struct{}

func noteFrom(ctx context.Context) *auditNote {
	n, _ := ctx.Value(auditNoteKey{}).(*auditNote)
	return n
}

// AuditDetail adds detail (e.g. the resolution: close, retry, cancel) to the audit entry of the
// request ctx belongs to. Without Protect in front it does nothing.
func AuditDetail(ctx context.Context, detail string) {
	if n := noteFrom(ctx); n != nil {
		n.detail = detail
	}
}

// AuditPrincipal sets who the request acted as, for handlers that establish it themselves
// (the console's login).
func AuditPrincipal(ctx context.Context, p Principal) {
	if n := noteFrom(ctx); n != nil {
		n.p = &p
	}
}

// AuditAction names the request's action and target when the route does not say them well.
func AuditAction(ctx context.Context, action, target string) {
	if n := noteFrom(ctx); n != nil {
		n.action, n.target = action, target
	}
}

// auditList serves GET /api/audit?cursor=&limit= (newest first, at most 1000 a page).
func auditList(l *AuditLog) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit := 100
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				writeErr(w, http.StatusBadRequest, "limit %q: want 1..1000", v)
				return
			}
			limit = n
		}
		entries, next, err := l.List(r.Context(), r.URL.Query().Get("cursor"), limit)
		if errors.Is(err, ErrBadCursor) {
			writeErr(w, http.StatusBadRequest, "cursor %q: %v", r.URL.Query().Get("cursor"), err)
			return
		}
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "next_cursor": next})
	}
}

func (s *Server) auditList(w http.ResponseWriter, r *http.Request) {
	if _, err := s.o.Auth.Authorize(r, RoleViewer); err != nil {
		refuse(w, err)
		return
	}
	auditList(s.o.Audit)(w, r)
}
