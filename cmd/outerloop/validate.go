package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/proc"
	"outerloop/workitems/config"
)

// validation is what validate learned: lines reported as they are, warnings (reported, the exit
// status unchanged) and problems that make it exit non-zero.
type validation struct {
	cfg      *config.Config
	loops    config.LoopRegistry // the loop kinds the config was loaded with (nil: built-in)
	workdir  string
	euid     int          // the process's effective uid (os.Geteuid outside tests)
	runner   *proc.Runner // the sandbox in force, once checkSandbox made it (nil before or when it failed)
	info     []string
	warnings []string
	problems []string
}

// validateCheck is one check of `outerloop validate`. Add a check by appending to
// validateChecks: it reads v.cfg (nil when the config did not load) and adds info and problems.
type validateCheck struct {
	name string
	run  func(ctx context.Context, v *validation)
}

func validateChecks() []validateCheck {
	return []validateCheck{
		{"sandbox", checkSandbox}, {"privilege", checkPrivilege},
		{"repos", checkRepos}, {"binaries", checkBinaries}, {"operator files", checkOperatorFiles}, {"tokens", checkTokens}, {"schedules", checkSchedules},
	}
}

// checkSandbox reports the sandbox mode in force and the templates it would refuse.
func checkSandbox(ctx context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	r, err := app.NewRunner(ctx, v.cfg, v.workdir)
	if err != nil {
		v.problems = append(v.problems, "sandbox: "+err.Error())
		return
	}
	v.runner = r
	v.info = append(v.info, "sandbox: "+r.Describe())
	for _, t := range v.cfg.Templates {
		mode := r.ModeFor(proc.Policy{Mode: t.Sandbox.Mode})
		net := string(t.Sandbox.Network)
		if net == "" {
			net = "default (registries for tools, script steps, done checks and stop hooks; host for exec agents)"
		}
		if len(t.Sandbox.Allow) > 0 {
			net += "; registries also allow " + strings.Join(t.Sandbox.Allow, ", ")
		}
		lim, _ := t.Sandbox.Limits.Resolve() // validated at load
		w := lim.Written
		v.info = append(v.info, fmt.Sprintf("template %q: sandbox %s, network %s, limits memory %s, processes %s, cpu_time %s, file_size %s",
			t.Name, mode, net, w.Memory, w.Processes, w.CPUTime, w.FileSize))
	}
	v.problems = append(v.problems, app.SandboxProblems(v.cfg, r)...)
}

func validateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Load the config and check it can run here: reports the sandbox mode in force, warns when run as root; exits 1 naming each problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := &validation{workdir: g.workdir, euid: g.euid()}
			if v.workdir == "" {
				v.workdir = filepath.Join(os.TempDir(), "outerloop-work")
			}
			cfg, err := g.loadConfig()
			if err != nil {
				v.problems = append(v.problems, "config: "+err.Error())
			} else {
				v.cfg = cfg
				v.info = append(v.info, fmt.Sprintf("config: %s: %d templates", g.config, len(cfg.Templates)))
			}
			for _, c := range validateChecks() {
				c.run(cmd.Context(), v)
			}
			return v.report(cmd.OutOrStdout())
		},
	}
}

func (v *validation) report(w io.Writer) error {
	for _, l := range v.info {
		fmt.Fprintln(w, l)
	}
	for _, l := range v.warnings {
		fmt.Fprintln(w, "warning: "+l)
	}
	for _, p := range v.problems {
		fmt.Fprintln(w, "problem: "+p)
	}
	if len(v.problems) > 0 {
		fmt.Fprintf(w, "%d problem(s)\n", len(v.problems))
		return exitError{code: 1}
	}
	fmt.Fprintln(w, "ok")
	return nil
}
