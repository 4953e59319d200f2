package main

import (
	"context"
	"log/slog"

	"outerloop/proc"
	"outerloop/workitems/config"
)

// What a worker running as root (effective uid 0) means, said the same way in its start log
// (serve, worker, demo) and by validate. The sandbox still confines the commands an item runs,
// but Bubblewrap maps their uid to the worker's (proc.SandboxUID), so outside their namespace
// they are root without capabilities; everything the worker does itself is root's.
const (
	rootConfined = "commands an item runs stay in the sandbox, but as root's uid outside its user namespace " +
		"(without capabilities: they own what root owns in the directories the sandbox shows)"
	rootUnconfined = "the worker's own files (work dir, mirrors, workspaces), its git operations on the host " +
		"and every command of a template with sandbox mode off run as root"
	rootHint = "run the worker as an unprivileged user: in a container the image's user outerloop (uid 10001), " +
		"on a host the systemd unit deploy/systemd/outerloop-worker.service (docs/containers.md)"
)

// unsandboxed returns the templates whose commands run without a sandbox under r, in config
// order: with the worker as root, those commands are plain root processes.
func unsandboxed(cfg *config.Config, r *proc.Runner) []string {
	if cfg == nil || r == nil {
		return nil
	}
	var out []string
	for _, t := range cfg.Templates {
		if r.ModeFor(proc.Policy{Mode: t.Sandbox.Mode}) == proc.ModeOff {
			out = append(out, t.Name)
		}
	}
	return out
}

// logPrivilege warns at a worker's start when it runs as root (euid is the process's effective
// uid, os.Geteuid outside tests); it says nothing otherwise.
func logPrivilege(log *slog.Logger, euid int, cfg *config.Config, r *proc.Runner) {
	if euid != 0 {
		return
	}
	attrs := []any{"euid", euid, "sandboxed", rootConfined, "unsandboxed", rootUnconfined}
	if names := unsandboxed(cfg, r); len(names) > 0 {
		attrs = append(attrs, "without_sandbox", templatesList(names))
	}
	log.Warn("worker runs as root", append(attrs, "fix", rootHint)...)
}

// checkPrivilege warns when validate runs as root: a worker started the same way would run as
// root. It is a warning, not a problem: such a worker runs every template correctly (the
// sandbox still confines items' commands), so validate's exit status, which says whether the
// config can run here, does not change.
func checkPrivilege(_ context.Context, v *validation) {
	if v.euid != 0 {
		return
	}
	w := "running as root (euid 0): a worker started like this runs as root: " + rootConfined + "; " + rootUnconfined
	if names := unsandboxed(v.cfg, v.runner); len(names) > 0 {
		w += " (here: " + templatesList(names) + ")"
	}
	v.warnings = append(v.warnings, w+"; "+rootHint)
}
