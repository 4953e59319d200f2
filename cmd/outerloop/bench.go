package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"outerloop/internal/benchmark"
	"outerloop/internal/redistest"
)

func benchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "Measure outerloop's overhead against raw Redis and raw asynq, in the same run, on --redis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.redisURL(nil, false)
			if err != nil {
				return err
			}
			opt, err := redis.ParseURL(url)
			if err != nil {
				return fmt.Errorf("redis URL: %w", err)
			}
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			ctx := cmd.Context()
			if err := rdb.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("redis at %s: %w", opt.Addr, err)
			}
			id := fmt.Sprintf("%d", time.Now().UnixNano())
			e := benchmark.Env{Redis: rdb, Asynq: asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password},
				Prefix: "olbench:" + id + ":", Queue: "olbench-" + id}
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				redistest.DeleteMatching(cctx, rdb, e.Prefix+"*")
				for _, q := range []string{e.Queue + "-raw", e.Queue + "-ol"} {
					redistest.DeleteMatching(cctx, rdb, "asynq:{"+q+"}*")
					rdb.SRem(cctx, "asynq:queues", q)
				}
			}()
			fmt.Fprintf(g.out, "outerloop bench on %s (keys under %s, removed afterwards)\n", opt.Addr, e.Prefix)
			results := benchmark.Run(e, g.out)
			fmt.Fprintf(g.out, "\n%-30s %14s   %-16s %14s   %s\n", "ours", "per op", "baseline", "per op", "ratio")
			for _, r := range results {
				fmt.Fprintf(g.out, "%-30s %14s   %-16s %14s   %.2fx\n", r.Name, time.Duration(r.NsPerOp),
					r.Baseline, time.Duration(r.BaselineNsPerOp), r.Ratio())
			}
			return nil
		},
	}
}
