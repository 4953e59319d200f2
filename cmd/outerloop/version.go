package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionCmd prints the build (module version, VCS revision and time from the binary's build
// info) and, when a config is found, its version: what `outerloop_config_version_info` and an
// item's config pin show.
func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build (module version, VCS revision) and the config version when a config is found",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			mod, rev, at, dirty := "(unknown)", "", "", false
			if bi, ok := debug.ReadBuildInfo(); ok {
				mod = bi.Main.Path + " " + bi.Main.Version
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.time":
						at = s.Value
					case "vcs.modified":
						dirty = s.Value == "true"
					}
				}
			}
			fmt.Fprintf(w, "outerloop: %s (%s)\n", mod, runtime.Version())
			if rev != "" {
				mark := ""
				if dirty {
					mark = " (modified)"
				}
				fmt.Fprintf(w, "revision: %s%s %s\n", rev, mark, at)
			}
			cfg, err := g.loadConfig()
			if err != nil {
				fmt.Fprintf(w, "config: none loaded from %s (%v)\n", g.config, err)
				return nil
			}
			fmt.Fprintf(w, "config: %s version %s (%d templates)\n", g.config, cfg.Version(), len(cfg.Templates))
			return nil
		},
	}
}
