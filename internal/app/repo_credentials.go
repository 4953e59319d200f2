package app

import (
	"fmt"

	"outerloop/forge"
	"outerloop/worker"
)

// repoCredentials gives the worker's mirror the credential of the forge a template's repo is
// on (forge.ForRepo: the repo URL's origin against each forge's; the templates' own forges
// first), read at each fetch as the push reads it. A repo on no forge, or on a forge whose
// token is unset, is read anonymously; the note says so in a failed fetch's error.
func (a *App) repoCredentials(repo string) (worker.GitCredential, string) {
	cfg := a.CurrentConfig()
	var prefer []string
	for i := range cfg.Templates {
		if cfg.Templates[i].Repo == repo {
			prefer = append(prefer, forge.TemplateForges(&cfg.Templates[i])...)
		}
	}
	name, ok := forge.ForRepo(cfg.Forges, repo, prefer...)
	if !ok {
		return nil, ""
	}
	f, err := a.Forges.Get(name)
	if err != nil {
		return nil, ""
	}
	auth, err := f.GitAuth(repo)
	if err != nil {
		return nil, fmt.Sprintf("read without credentials: %v", err)
	}
	return auth, fmt.Sprintf("read with the token of forge %s ($%s)", name, cfg.Forges[name].TokenEnv)
}
