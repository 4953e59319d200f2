package main

import (
	"net/http"
	"time"

	"outerloop/api"
	"outerloop/internal/app"
)

// registerConsole mounts the web console next to the API.
func registerConsole(mux *http.ServeMux, a *app.App, auth *api.Auth, nextRun func(string) (time.Time, bool)) {
}
