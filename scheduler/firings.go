package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// Firing is the last firing of a template's triggers of one source: when, and what became of
// it.
type Firing struct {
	At     time.Time               `json:"at"`
	Result workitems.TriggerResult `json:"result"`
}

// FiringLog is a TriggerObserver that keeps each configured template's last firing per trigger
// source (one small hash a template; Queue.LastFirings reads it for the templates page) and
// passes every firing on to next (the metrics). A firing refused before it named a configured
// template is passed on only. Recording is best effort: a Redis error is logged, and the
// firing's own result stands.
type FiringLog struct {
	q    *Queue
	next TriggerObserver
}

// NewFiringLog returns the FiringLog of q's templates, passing firings on to next (nil: none).
func NewFiringLog(q *Queue, next TriggerObserver) *FiringLog { return &FiringLog{q: q, next: next} }

// firingWrite bounds the write of one firing: the caller (a webhook or trigger request) waits
// for it.
const firingWrite = 2 * time.Second

// TriggerFiring implements TriggerObserver.
func (f *FiringLog) TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult) {
	if f.next != nil {
		f.next.TriggerFiring(template, source, result)
	}
	if _, ok := f.q.Config().Template(template); !ok {
		return
	}
	b, err := json.Marshal(Firing{At: f.q.clock.Now().UTC(), Result: result})
	if err != nil {
		return // a Firing always marshals
	}
	ctx, cancel := context.WithTimeout(context.Background(), firingWrite)
	defer cancel()
	if err := f.q.store.Redis().HSet(ctx, f.q.keys().firings(template), string(source), b).Err(); err != nil {
		f.q.log.Warn("trigger: recording the last firing", "template", template, "source", source, "err", err)
	}
}

// LastFirings returns the last firing per source of each of templates that has fired, in one
// round trip (a page of the templates list).
func (q *Queue) LastFirings(ctx context.Context, templates []string) (map[string]map[workitems.TriggerSource]Firing, error) {
	cmds := make([]*redis.MapStringStringCmd, len(templates))
	_, err := q.store.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range templates {
			cmds[i] = p.HGetAll(ctx, q.keys().firings(t))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: last firings: %w", err)
	}
	out := map[string]map[workitems.TriggerSource]Firing{}
	for i, t := range templates {
		for src, v := range cmds[i].Val() {
			var fr Firing
			if json.Unmarshal([]byte(v), &fr) != nil {
				continue // not ours to read: written by no version of this code
			}
			if out[t] == nil {
				out[t] = map[workitems.TriggerSource]Firing{}
			}
			out[t][workitems.TriggerSource(src)] = fr
		}
	}
	return out, nil
}
