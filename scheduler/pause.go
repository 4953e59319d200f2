package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Pausing. A paused template's cron ticks are skipped: each is still handled (the template's
// "handled up to" mark moves, so resuming counts no misfires for the pause), reported as
// TickSkippedPaused, logged, counted as a skip with reason "paused", and counted in the pause
// record (Pause.Skipped). A person's own requests — enqueue, run now, re-run — still create
// items of a paused template: pausing stops the schedule, not the people (a fix is usually
// tried by hand before the schedule is resumed). A paused template's triggers make no items
// either (triggers.go). The pause lives in Redis, so every scheduler replica sees it at its next
// tick without a restart.

// ErrAlreadyPaused and ErrNotPaused refuse a pause of a paused template and a resume of one
// that is not paused; neither changes anything.
var (
	ErrAlreadyPaused = errors.New("template is already paused")
	ErrNotPaused     = errors.New("template is not paused")
	// ErrNoSchedule refuses a pause of a template without a schedule or triggers: there is
	// nothing to pause.
	ErrNoSchedule = errors.New("template has no schedule")
	// ErrBadControl is a control request with bad text (no actor, a reason too long or not UTF-8).
	ErrBadControl = errors.New("bad control request")
)

// MaxReason bounds a pause reason, in bytes.
const MaxReason = 500

// controlLogLen is how many control records a template keeps (newest first).
const controlLogLen = 100

// Pause is a template's pause: who paused it, why, when, and what it has skipped since.
type Pause struct {
	Template    string    `json:"template"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason,omitempty"`
	At          time.Time `json:"at"`
	Skipped     int64     `json:"skipped"`               // cron ticks skipped while paused
	LastSkipped time.Time `json:"last_skipped,omitzero"` // the newest of them
}

// pauseScript pauses a template unless it is paused, and logs the control.
//
//	KEYS[1] the template's pause hash, KEYS[2] its control log
//	ARGV[1] actor, ARGV[2] reason, ARGV[3] unix ms, ARGV[4] control record JSON, ARGV[5] log length
//
// Returns 1 when it paused the template, else the existing pause's fields (HGETALL).
var pauseScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HGETALL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'actor', ARGV[1], 'reason', ARGV[2], 'at', ARGV[3], 'skipped', 0)
redis.call('LPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
return 1
`)

// resumeScript ends a template's pause and logs the control.
//
//	KEYS[1] the template's pause hash, KEYS[2] its control log
//	ARGV[1] control record JSON, ARGV[2] log length
//
// Returns the ended pause's fields (HGETALL), or 0 when the template was not paused.
var resumeScript = redis.NewScript(`
local p = redis.call('HGETALL', KEYS[1])
if #p == 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
return p
`)

// skipScript decides whether a tick of a template is skipped because it is paused, and counts
// it in the pause record once however many replicas handle the same tick.
//
//	KEYS[1] the template's pause hash
//	ARGV[1] the tick, unix ms
//
// Returns 0 (not paused: run it), 1 (paused; counted now) or 2 (paused; counted already).
var skipScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_skipped') or '0')
if tonumber(ARGV[1]) <= last then return 2 end
redis.call('HINCRBY', KEYS[1], 'skipped', 1)
redis.call('HSET', KEYS[1], 'last_skipped', ARGV[1])
return 1
`)

func (q *Queue) keys() keys { return keys{p: q.store.Prefix()} }

// checkControl validates the text of a control request.
func checkControl(actor, reason string) error {
	switch {
	case strings.TrimSpace(actor) == "":
		return fmt.Errorf("scheduler: actor: missing: %w", ErrBadControl)
	case !utf8.ValidString(actor) || !utf8.ValidString(reason):
		return fmt.Errorf("scheduler: actor and reason: %w", ErrInvalidUTF8)
	case len(reason) > MaxReason:
		return fmt.Errorf("scheduler: reason: %d bytes, at most %d: %w", len(reason), MaxReason, ErrBadControl)
	}
	return nil
}

// Pause stops the cron ticks and the triggers of a template until Resume, recording actor and
// reason. It is refused (changing nothing) for an unknown template (ErrUnknownTemplate), one with
// neither schedule nor triggers (ErrNoSchedule) and one already paused (ErrAlreadyPaused, naming
// who paused it).
func (q *Queue) Pause(ctx context.Context, template, actor, reason string) (Pause, error) {
	t, ok := q.cfg.Load().Template(template)
	if !ok {
		return Pause{}, fmt.Errorf("scheduler: pause %q: %w", template, ErrUnknownTemplate)
	}
	if t.Schedule == "" && len(t.Triggers) == 0 {
		return Pause{}, fmt.Errorf("scheduler: pause %q: %w (it runs only when enqueued)", template, ErrNoSchedule)
	}
	reason = strings.TrimSpace(reason)
	if err := checkControl(actor, reason); err != nil {
		return Pause{}, err
	}
	now := q.clock.Now().UTC()
	rec := ControlRecord{Action: ControlPause, Template: template, Actor: actor, Reason: reason, At: now}
	res, err := pauseScript.Run(ctx, q.store.Redis(), []string{q.keys().paused(template), q.keys().controls(template)},
		actor, reason, now.UnixMilli(), rec.json(), controlLogLen).Result()
	if err != nil {
		return Pause{}, fmt.Errorf("scheduler: pause %q: %w", template, err)
	}
	if fields, ok := res.([]any); ok {
		p := pauseFrom(template, fields)
		return p, fmt.Errorf("scheduler: pause %q: %w (by %s at %s)", template, ErrAlreadyPaused, p.Actor, p.At.Format(time.RFC3339))
	}
	q.log.Info("template paused", "template", template, "actor", actor, "reason", reason)
	return Pause{Template: template, Actor: actor, Reason: reason, At: now}, nil
}

// Resume ends a template's pause: its next tick runs. It returns the pause that ended (with the
// ticks it skipped); ErrUnknownTemplate or ErrNotPaused refuse it, changing nothing.
func (q *Queue) Resume(ctx context.Context, template, actor string) (Pause, error) {
	if _, ok := q.cfg.Load().Template(template); !ok {
		return Pause{}, fmt.Errorf("scheduler: resume %q: %w", template, ErrUnknownTemplate)
	}
	if err := checkControl(actor, ""); err != nil {
		return Pause{}, err
	}
	now := q.clock.Now().UTC()
	rec := ControlRecord{Action: ControlResume, Template: template, Actor: actor, At: now}
	res, err := resumeScript.Run(ctx, q.store.Redis(), []string{q.keys().paused(template), q.keys().controls(template)},
		rec.json(), controlLogLen).Result()
	if err != nil {
		return Pause{}, fmt.Errorf("scheduler: resume %q: %w", template, err)
	}
	fields, ok := res.([]any)
	if !ok {
		return Pause{}, fmt.Errorf("scheduler: resume %q: %w", template, ErrNotPaused)
	}
	p := pauseFrom(template, fields)
	q.log.Info("template resumed", "template", template, "actor", actor, "paused_by", p.Actor, "skipped", p.Skipped)
	return p, nil
}

// PauseOf returns a template's pause, or nil when it is not paused.
func (q *Queue) PauseOf(ctx context.Context, template string) (*Pause, error) {
	m, err := q.Pauses(ctx, []string{template})
	if err != nil {
		return nil, err
	}
	if p, ok := m[template]; ok {
		return &p, nil
	}
	return nil, nil
}

// Pauses returns the pauses of those of templates that are paused, in one pipeline.
func (q *Queue) Pauses(ctx context.Context, templates []string) (map[string]Pause, error) {
	cmds := make([]*redis.MapStringStringCmd, len(templates))
	_, err := q.store.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range templates {
			cmds[i] = p.HGetAll(ctx, q.keys().paused(t))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: pauses: %w", err)
	}
	out := map[string]Pause{}
	for i, t := range templates {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue
		}
		fields := make([]any, 0, 2*len(m))
		for k, v := range m {
			fields = append(fields, k, v)
		}
		out[t] = pauseFrom(t, fields)
	}
	return out, nil
}

// skipPaused reports whether the tick at of template is to be skipped because the template is
// paused, counting it in the pause record (once across replicas).
func (q *Queue) skipPaused(ctx context.Context, template string, at time.Time) (bool, error) {
	n, err := skipScript.Run(ctx, q.store.Redis(), []string{q.keys().paused(template)}, at.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("scheduler: template %q: reading its pause: %w", template, err)
	}
	return n != 0, nil
}

// pauseFrom reads a pause hash returned as a flat field/value list.
func pauseFrom(template string, fields []any) Pause {
	p := Pause{Template: template}
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		switch k {
		case "actor":
			p.Actor = v
		case "reason":
			p.Reason = v
		case "at":
			p.At = unixMilli(v)
		case "skipped":
			p.Skipped, _ = strconv.ParseInt(v, 10, 64)
		case "last_skipped":
			p.LastSkipped = unixMilli(v)
		}
	}
	return p
}

func unixMilli(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
