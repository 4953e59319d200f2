package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"outerloop/workitems/config"
)

// checkOperatorFiles: the files outside the workspace that templates' commands name (a stop
// hook's script next to the config, a done check in /opt) are shown read-only inside the
// sandbox, or refused here naming the path (config.OperatorFileProblems); files under the
// work dir, which the sandbox hides with every workspace and mirror in it, are refused too.
func checkOperatorFiles(_ context.Context, v *validation) {
	if v.cfg == nil {
		return
	}
	workdir, _ := filepath.Abs(v.workdir)
	for i := range v.cfg.Templates {
		t := &v.cfg.Templates[i]
		local := ""
		if t.Repo != "" && !isRemote(t.Repo) {
			local = resolveRepo(v.cfg, t.Repo)
		}
		for _, p := range config.OperatorFileProblems(t, v.cfg.Dir, local) {
			v.problems = append(v.problems, fmt.Sprintf("template %q: %s", t.Name, p))
		}
		var shown []string
		for _, f := range t.OperatorFiles {
			if workdir != "" && (f == workdir || strings.HasPrefix(f, workdir+"/")) {
				v.problems = append(v.problems, fmt.Sprintf("template %q: %s is under the work dir %s, which the sandbox hides: keep operator scripts elsewhere", t.Name, f, workdir))
				continue
			}
			shown = append(shown, f)
		}
		if len(shown) > 0 {
			v.info = append(v.info, fmt.Sprintf("template %q: shown read-only in the sandbox: %s", t.Name, strings.Join(shown, ", ")))
		}
	}
}
