package proc

import "strings"

// WithFiles returns p with the operator's files (config.Template.OperatorFiles) bound
// read-only. Policy.ReadOnly binds come after the hidden directories, so a script inside the
// hidden config directory is shown alone and the rest of that directory stays hidden. Files
// inside the workspace are the workspace's already.
func (p Policy) WithFiles(files []string) Policy {
	for _, f := range files {
		if p.Workspace != "" && (f == p.Workspace || strings.HasPrefix(f, p.Workspace+"/")) {
			continue
		}
		p.ReadOnly = append(p.ReadOnly, f)
	}
	return p
}
