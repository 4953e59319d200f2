package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/fleet"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// FleetFigure is the scheduler's work for one tick of a fleet template of Repos repositories
// (the median of Rounds ticks): an item per repository, held in the fleet's line.
type FleetFigure struct {
	Repos  int
	Rounds int
	Tick   time.Duration
	// Commands is the Redis commands of one tick (the last), counted on the scheduler's client:
	// linear in Repos is what a tick must cost.
	Commands int64
}

// Per100 is the tick's time per hundred repositories.
func (f FleetFigure) Per100() time.Duration { return f.Tick * 100 / time.Duration(max(f.Repos, 1)) }

const fleetConfig = `
defaults: {budget: {wall_time: 10m}}
forges:
  tea: {kind: gitea, base_url: https://gitea.example.com, token_env: TEA_TOKEN}
templates:
  - name: fleet-bench
    repos: [%s]
    goal: bump
    fleet: {concurrency: 4, max_open_prs: 10}
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: tea, mode: pull_request}
`

// FleetTick times ticks of a fleet template over each of sizes repositories, in one run, with
// the gate as production has it (items held in line: the limits are set).
func FleetTick(ctx context.Context, e Env, sizes []int, rounds int, progress io.Writer) ([]FleetFigure, error) {
	var out []FleetFigure
	client := asynq.NewClient(e.Asynq)
	defer client.Close()
	// The scheduler's store reads through its own client, counted.
	rdb, ok := e.Asynq.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, fmt.Errorf("benchmark: the asynq connection gives no go-redis client")
	}
	defer rdb.Close()
	cnt := &counter{}
	rdb.AddHook(cnt)
	for _, n := range sizes {
		fmt.Fprintf(progress, "  measuring a fleet tick over %d repositories…\n", n)
		repos := make([]string, n)
		for i := range repos {
			repos[i] = fmt.Sprintf("https://gitea.example.com/acme/r%04d.git", i)
		}
		cfg, err := config.ParseConfig(fmt.Appendf(nil, fleetConfig, strings.Join(repos, ", ")))
		if err != nil {
			return nil, err
		}
		prefix := fmt.Sprintf("%sfleet%d:", e.Prefix, n)
		gate := fleet.NewGate(rdb, prefix, nil)
		store := itemstore.NewStore(rdb, prefix, itemstore.WithTransitionHook(gate.TransitionHook()))
		q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: e.Queue, Fleet: gate,
			Logger: slog.New(slog.DiscardHandler)})
		t, _ := cfg.Template("fleet-bench")
		var times []time.Duration
		var commands int64
		tick := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
		for r := range max(rounds, 1) {
			at := tick.Add(time.Duration(r) * 24 * time.Hour)
			before := cnt.n.Load()
			start := wall.Now()
			ft, err := q.SubmitFleet(ctx, t, workitems.Origin{Kind: workitems.OriginCron, Actor: "bench", Tick: at}, "",
				func(repo string) string { return workitems.FleetItemID(t.Name, at, repo) })
			times = append(times, wall.Now().Sub(start))
			commands = cnt.n.Load() - before
			if err != nil {
				return nil, err
			}
			if ft.Created != n {
				return nil, fmt.Errorf("benchmark: fleet tick over %d made %d items", n, ft.Created)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		out = append(out, FleetFigure{Repos: n, Rounds: len(times), Tick: times[len(times)/2], Commands: commands})
	}
	return out, nil
}
