package main

import "github.com/spf13/cobra"

func benchCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "bench", Short: "Measure outerloop's overhead against raw Redis and raw asynq in the same run"}
}
