package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// WorkspaceDisk is the gauge of the disk a worker's work dir uses, by kind (workspaces,
// mirrors), fed by the worker's workspace sweeper after each sweep. It implements the worker's
// DiskObserver.
type WorkspaceDisk struct {
	g *prometheus.GaugeVec
}

// NewWorkspaceDisk registers outerloop_workspace_disk_bytes on m's registry (once: a second call
// returns the same gauge). It is nil, and does nothing, for a nil m.
func NewWorkspaceDisk(m *Metrics) *WorkspaceDisk {
	if m == nil {
		return nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "workspace_disk_bytes",
		Help: "Disk used on this worker by attempt workspaces and by bare repository mirrors, in bytes (measured by the workspace sweeper).",
	}, []string{"kind"})
	if err := m.reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err) // a programming error: another collector took the name
		}
		g = are.ExistingCollector.(*prometheus.GaugeVec)
	}
	return &WorkspaceDisk{g: g}
}

// WorkspaceDisk sets the gauge.
func (w *WorkspaceDisk) WorkspaceDisk(workspaces, mirrors int64) {
	if w == nil {
		return
	}
	w.g.WithLabelValues("workspaces").Set(float64(workspaces))
	w.g.WithLabelValues("mirrors").Set(float64(mirrors))
}
