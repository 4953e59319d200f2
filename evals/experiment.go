package evals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// State is where an experiment is: running until every run ended, then finished; stopped when
// its budget could not cover the runs left.
type State string

// The experiment states.
const (
	StateRunning  State = "running"
	StateFinished State = "finished"
	StateStopped  State = "stopped"
)

// VariantSpec is a variant as an experiment keeps it: its name and its overlay as the user
// wrote it, so that every worker applies it to its own copy of the config.
type VariantSpec struct {
	Name    string `json:"name"`
	Overlay string `json:"overlay,omitempty"` // YAML
	Source  string `json:"source,omitempty"`  // the file it came from
}

// Experiment is one run of a suite under named variants. It is durable like an item: its runs
// are items in the eval namespace with deterministic ids, so an eval process or a worker killed
// in the middle loses nothing, and a resumed experiment enqueues only the runs not yet made.
type Experiment struct {
	ID       string        `json:"id"`
	Suite    Suite         `json:"suite"`
	Variants []VariantSpec `json:"variants"`
	Repeat   int           `json:"repeat"`
	// BudgetUSD bounds what the experiment starts (0: none): a run is enqueued only while what
	// ended runs spent plus the caps of running ones plus its own cap fits. Spend is counted as
	// reported, so it passes the budget only by what runs spend past their own caps (a worker
	// checks a cap before a model call, not during one).
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// ConfigVersion is the production config's version when the experiment was made.
	ConfigVersion string `json:"config_version"`
	// Versions is what the experiment ran under, comparable across experiments.
	Versions  Versions  `json:"versions,omitzero"`
	Actor     string    `json:"actor,omitempty"`
	State     State     `json:"state"`
	Reason    string    `json:"reason,omitempty"` // why it stopped
	CreatedAt time.Time `json:"created_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Versions are the versions an experiment ran under. None is a hash of a run template as
// named (RunTemplate carries the experiment id): two experiments of the same suite and
// variants over the same config record equal versions, and a changed variant a different one.
type Versions struct {
	Config string `json:"config"`
	// Templates is, per template the suite uses, its version as the production config has it.
	Templates map[string]string `json:"templates"`
	// Variants is, per variant and template, the version of the template its runs use: the
	// variant over the template with what evals force (Variant.Apply), under the template's
	// own name and without a task's repo or goal (those are the suite's).
	Variants map[string]map[string]string `json:"variants"`
}

// Total is the number of runs: tasks × variants × repetitions.
func (e *Experiment) Total() int { return len(e.Suite.Tasks) * len(e.Variants) * e.Repeat }

// VariantNames lists the variant names in the order given.
func (e *Experiment) VariantNames() []string {
	out := make([]string, len(e.Variants))
	for i, v := range e.Variants {
		out[i] = v.Name
	}
	return out
}

// RunRef names one run: a task under a variant, repetition Rep (0-based).
type RunRef struct {
	Task, Variant string
	Rep           int
}

// Runs lists the experiment's runs in the order they are enqueued: repetition by repetition,
// and within one, task by task with every variant side by side, so that a stopped experiment
// has compared the variants on the same tasks.
func (e *Experiment) Runs() []RunRef {
	out := make([]RunRef, 0, e.Total())
	for rep := range e.Repeat {
		for _, t := range e.Suite.Tasks {
			for _, v := range e.Variants {
				out = append(out, RunRef{Task: t.ID, Variant: v.Name, Rep: rep})
			}
		}
	}
	return out
}

// ItemID is the id of a run's item: deterministic, so a resumed experiment finds what it made.
func (e *Experiment) ItemID(r RunRef) string {
	return e.ID + "." + r.Task + "." + r.Variant + "." + strconv.Itoa(r.Rep)
}

// RunTemplate is the name of the template a run of task under variant uses in the eval
// namespace: the task's template with the variant over it.
func RunTemplate(experiment, task, variant string) string {
	return experiment + "/" + task + "/" + variant
}

// NewID returns a fresh experiment id: sortable by time, unique across processes.
func NewID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "x" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// ErrNotFound is returned for an experiment the store does not have.
var ErrNotFound = errors.New("evals: experiment not found")

// keys builds the Redis keys of experiments, under the deployment's prefix.
type keys struct{ p string }

func (k keys) exp(id string) string  { return k.p + "eval:exp:" + id }
func (k keys) all() string           { return k.p + "eval:exps" }   // zset: id → created (unix ms)
func (k keys) active() string        { return k.p + "eval:active" } // set: ids of running experiments
func (k keys) ended() string         { return k.p + "eval:ended" }  // zset: id → ended (unix ms)
func (k keys) runs(id string) string { return k.p + "eval:runs:" + id }

// ItemPrefix is the key prefix of the eval namespace's item store under a deployment prefix:
// its items, indexes, events and counters are apart from production's, so no production list,
// inbox, notification, daily cap or metric sees them.
func ItemPrefix(prefix string) string { return prefix + "eval:items:" }

// Store keeps experiments and their finished runs.
type Store struct {
	rdb redis.UniversalClient
	k   keys
}

// NewStore returns the experiment store of a deployment (its store prefix, e.g. "ol:").
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, k: keys{p: prefix}}
}

// createScript records an experiment and indexes it in one step: KEYS exp, all, active;
// ARGV json, created (unix ms), id. It returns 0 when the id is in use.
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
return 1`)

// Create records a new experiment as running; an id in use is refused.
func (s *Store) Create(ctx context.Context, e *Experiment) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("evals: experiment %s: %w", e.ID, err)
	}
	ok, err := createScript.Run(ctx, s.rdb, []string{s.k.exp(e.ID), s.k.all(), s.k.active()},
		b, e.CreatedAt.UnixMilli(), e.ID).Int()
	if err != nil {
		return fmt.Errorf("evals: create experiment %s: %w", e.ID, err)
	}
	if ok == 0 {
		return fmt.Errorf("evals: experiment %s exists", e.ID)
	}
	return nil
}

// Get returns an experiment.
func (s *Store) Get(ctx context.Context, id string) (*Experiment, error) {
	b, err := s.rdb.Get(ctx, s.k.exp(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("evals: experiment %s: %w", id, err)
	}
	return decodeExperiment(id, b)
}

func decodeExperiment(id string, b []byte) (*Experiment, error) {
	var e Experiment
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("evals: experiment %s: %w", id, err)
	}
	return &e, nil
}

// End records that an experiment finished or stopped (with the reason); ending one that ended
// already changes nothing. The record and the indexes change together, and only if no one
// changed the record in between (a driver and a status call may both see the last run end).
func (s *Store) End(ctx context.Context, id string, st State, reason string, at time.Time) (*Experiment, error) {
	return s.change(ctx, id, "end experiment", func(e *Experiment) (bool, error) {
		if e.State != StateRunning {
			return false, nil
		}
		e.State, e.Reason, e.EndedAt = st, reason, at
		return true, nil
	}, func(p redis.Pipeliner, e *Experiment) {
		p.SRem(ctx, s.k.active(), id)
		p.ZAdd(ctx, s.k.ended(), redis.Z{Score: float64(at.UnixMilli()), Member: id})
	})
}

// SetBudget changes a running experiment's budget (eval run --resume ID --budget on one still
// running): the next round enqueues against it. It changes nothing else, and only if no one
// changed the record in between; an experiment that ended is refused (Reopen raises its budget).
func (s *Store) SetBudget(ctx context.Context, id string, usd float64) (*Experiment, error) {
	return s.change(ctx, id, "set the budget of experiment", func(e *Experiment) (bool, error) {
		if e.State != StateRunning {
			return false, fmt.Errorf("evals: experiment %s is %s: its budget changes only as it resumes", id, e.State)
		}
		e.BudgetUSD = usd
		return true, nil
	}, nil)
}

// change is the one guarded update of an experiment's record: it reads the record under WATCH,
// lets edit change it (false: nothing to write), and writes it with also's commands in one
// MULTI, reading again when another writer came in between. It returns the record as read or
// written.
func (s *Store) change(ctx context.Context, id, what string, edit func(*Experiment) (bool, error),
	also func(redis.Pipeliner, *Experiment)) (*Experiment, error) {
	var out *Experiment
	var refused error // edit's own: returned as it is
	key := s.k.exp(id)
	txf := func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("evals: experiment %s: %w", id, err)
		}
		e, err := decodeExperiment(id, b)
		if err != nil {
			return err
		}
		out = e
		write, err := edit(e)
		if err != nil {
			refused = err
			return err
		}
		if !write {
			return nil
		}
		nb, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("evals: experiment %s: %w", id, err)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, nb, 0)
			if also != nil {
				also(p, e)
			}
			return nil
		})
		return err
	}
	for range 10 {
		err := s.rdb.Watch(ctx, txf, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue // changed in between: read it again
		}
		if err != nil {
			if errors.Is(err, ErrNotFound) || (refused != nil && errors.Is(err, refused)) {
				return nil, err
			}
			return nil, fmt.Errorf("evals: %s %s: %w", what, id, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("evals: %s %s: changed by others ten times in a row", what, id)
}

// Reopen marks an ended experiment running again (eval run --resume after a stop: a raised
// budget or more time).
func (s *Store) Reopen(ctx context.Context, e *Experiment) error {
	e.State, e.Reason, e.EndedAt = StateRunning, "", time.Time{}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("evals: experiment %s: %w", e.ID, err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.k.exp(e.ID), b, 0)
		p.SAdd(ctx, s.k.active(), e.ID)
		p.ZRem(ctx, s.k.ended(), e.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("evals: reopen experiment %s: %w", e.ID, err)
	}
	return nil
}

// Active returns the ids of running experiments (the worker's eval lane builds their
// templates).
func (s *Store) Active(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, s.k.active()).Result()
	if err != nil {
		return nil, fmt.Errorf("evals: running experiments: %w", err)
	}
	return ids, nil
}

// List returns a page of experiments, newest first, and the total (Page without the counts).
func (s *Store) List(ctx context.Context, offset, limit int) ([]*Experiment, int64, error) {
	page, total, err := s.Page(ctx, offset, limit)
	out := make([]*Experiment, len(page))
	for i, l := range page {
		out[i] = l.Experiment
	}
	return out, total, err
}

// RecordRun keeps a finished run's result; the first record of a run wins (a resumed driver
// and a status call may both see it end).
func (s *Store) RecordRun(ctx context.Context, id string, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("evals: run of %s: %w", id, err)
	}
	if err := s.rdb.HSetNX(ctx, s.k.runs(id), runKey(r.Task, r.Variant, r.Rep), b).Err(); err != nil {
		return fmt.Errorf("evals: record run of %s: %w", id, err)
	}
	return nil
}

// FinishedRuns returns the recorded runs of an experiment, keyed like runKey.
func (s *Store) FinishedRuns(ctx context.Context, id string) (map[string]Run, error) {
	m, err := s.rdb.HGetAll(ctx, s.k.runs(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("evals: runs of %s: %w", id, err)
	}
	out := make(map[string]Run, len(m))
	for k, v := range m {
		var r Run
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, fmt.Errorf("evals: run %s of %s: %w", k, id, err)
		}
		out[k] = r
	}
	return out, nil
}

// Delete removes an experiment and its run records (retention); its items are the eval
// namespace's and go with that store's retention.
func (s *Store) Delete(ctx context.Context, id string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.k.exp(id), s.k.runs(id))
		p.ZRem(ctx, s.k.all(), id)
		p.ZRem(ctx, s.k.ended(), id)
		p.SRem(ctx, s.k.active(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("evals: delete experiment %s: %w", id, err)
	}
	return nil
}

// IndexEnded puts every ended experiment that the ended index lacks into it (experiments that
// ended before the index existed, or under an older binary), a page at a time; it returns how
// many it added.
func (s *Store) IndexEnded(ctx context.Context) (int, error) {
	added := 0
	for offset := 0; ; offset += 100 {
		page, _, err := s.Page(ctx, offset, 100)
		if err != nil {
			return added, err
		}
		if len(page) == 0 {
			return added, nil
		}
		for _, l := range page {
			e := l.Experiment
			if e.State == StateRunning {
				continue
			}
			at := e.EndedAt
			if at.IsZero() {
				at = e.CreatedAt
			}
			n, err := s.rdb.ZAddNX(ctx, s.k.ended(), redis.Z{Score: float64(at.UnixMilli()), Member: e.ID}).Result()
			if err != nil {
				return added, fmt.Errorf("evals: index ended experiment %s: %w", e.ID, err)
			}
			added += int(n)
		}
	}
}

// EndedBefore returns up to n ids of experiments that ended before t, oldest first (the
// retention janitor's candidates).
func (s *Store) EndedBefore(ctx context.Context, t time.Time, n int) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.k.ended(), &redis.ZRangeBy{Min: "-inf", Max: "(" + strconv.FormatInt(t.UnixMilli(), 10), Count: int64(n)}).Result()
	if err != nil {
		return nil, fmt.Errorf("evals: ended experiments: %w", err)
	}
	return ids, nil
}

func runKey(task, variant string, rep int) string {
	return task + "\x00" + variant + "\x00" + strconv.Itoa(rep)
}

// RunFromItem is the result of a run whose item ended: closed when the outer loop closed it,
// with the last attempt's exit and the item's whole spend.
func RunFromItem(r RunRef, it *workitems.Item) Run {
	out := Run{Task: r.Task, Variant: r.Variant, Rep: r.Rep, Closed: it.State == workitems.StateClosed,
		CostUSD: it.Spend.CostUSD, ModelCalls: int(it.Spend.ModelCalls),
		Tokens: int(it.Spend.InputTokens + it.Spend.OutputTokens), WallTime: it.Spend.WallTime.D()}
	if a := it.Current(); a != nil && a.Exit != nil {
		out.Exit = string(a.Exit.Reason)
	}
	if out.WallTime == 0 && !it.UpdatedAt.IsZero() {
		out.WallTime = it.UpdatedAt.Sub(it.CreatedAt)
	}
	return out
}
