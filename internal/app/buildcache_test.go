package app_test

import (
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// parseConfig is config.ParseConfig with build_cache: shared for every template that names
// no build cache of its own. These tests compile Go in the sandbox in a new work dir each, where
// the default (one build cache per repository, kept in the work dir) would compile the standard
// library afresh in every test; the worker's own cache, as before, keeps them fast. The default
// is tested where it is decided (proc) and by the hostile-repository suite.
func parseConfig(b []byte) (*config.Config, error) {
	cfg, err := config.ParseConfig(b)
	if err != nil {
		return cfg, err
	}
	for i := range cfg.Templates {
		if cfg.Templates[i].Sandbox.BuildCache == "" {
			cfg.Templates[i].Sandbox.BuildCache = workitems.BuildCacheShared
		}
	}
	return cfg, nil
}
