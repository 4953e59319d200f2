package main

import (
	"net/http"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/internal/app"
)

// registerConsole mounts the web console next to the API.
func registerConsole(mux *http.ServeMux, a *app.App, auth *api.Auth, nextRun func(string) (time.Time, bool), audit *api.AuditLog) *console.Console {
	c := console.New(console.Options{Queue: a.Queue, Store: a.Store, Auth: auth, NextRun: nextRun, Fleet: a.Fleet, Logger: a.Logger, Audit: audit,
		Experiments: a.EvalRunner()})
	c.Register(mux)
	return c
}
