// Package dashboards owns outerloop's monitoring artefacts: the Grafana dashboards (classic JSON
// model, datasource chosen through a ${datasource} variable), the Prometheus alert rules
// (alerts.yml) and their promtool unit tests (alerts_test.yml). They are embedded so tools and
// tests read exactly the files that Grafana and Prometheus load.
//
// The tests of this package also check the docker-compose stack at the repository root
// (docker-compose.yml, Dockerfile, deploy/) since no Docker engine runs in CI, and the systemd
// unit of a worker on a host (deploy/systemd; with systemd-analyze verify where it is installed).
package dashboards

import (
	"embed"
	"io/fs"
	"path"
)

//go:embed *.json alerts.yml alerts_test.yml
var files embed.FS

// Rules is the file name of the alert rules, AlertTests that of their promtool unit tests.
const (
	Rules      = "alerts.yml"
	AlertTests = "alerts_test.yml"
)

// FS returns the embedded dashboards, rules and rule tests.
func FS() fs.FS { return files }

// Dashboards returns the file names of the dashboard JSON files, sorted.
func Dashboards() []string {
	names, _ := fs.Glob(files, "*.json") // the pattern is constant and valid
	for i, n := range names {
		names[i] = path.Base(n)
	}
	return names
}
