package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ReloadResult is what one config reload did.
type ReloadResult string

// The reload results.
const (
	ReloadApplied   ReloadResult = "applied"   // a new valid config is in force
	ReloadUnchanged ReloadResult = "unchanged" // the file's config is the one in force
	ReloadInvalid   ReloadResult = "invalid"   // the new file does not load; the old config stays
)

// AllReloadResults lists the results.
func AllReloadResults() []ReloadResult {
	return []ReloadResult{ReloadApplied, ReloadUnchanged, ReloadInvalid}
}

// ConfigReloads counts a process's config reloads by result (outerloop_config_reload_total)
// and shows the config version in force (outerloop_config_version_info{version} 1; a fleet
// whose processes show different versions has not reloaded everywhere).
type ConfigReloads struct {
	total *prometheus.CounterVec
	info  *prometheus.GaugeVec

	mu      sync.Mutex
	version string
}

// NewConfigReloads registers the reload series on m's registry, each result at zero.
func (m *Metrics) NewConfigReloads() *ConfigReloads {
	c := &ConfigReloads{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outerloop_config_reload_total",
			Help: "Config reloads (SIGHUP or a changed file) by result: applied, unchanged, invalid (the old config stays)."},
			[]string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "outerloop_config_version_info",
			Help: "1 for the config version (stable hash of the normalised config) this process runs."}, []string{"version"}),
	}
	for _, r := range AllReloadResults() {
		c.total.WithLabelValues(string(r))
	}
	if m != nil {
		m.reg.MustRegister(c.total, c.info)
	}
	return c
}

// Reloaded counts one reload.
func (c *ConfigReloads) Reloaded(r ReloadResult) { c.total.WithLabelValues(string(r)).Inc() }

// SetVersion shows v as the version in force.
func (c *ConfigReloads) SetVersion(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == c.version {
		return
	}
	c.info.Reset()
	c.info.WithLabelValues(v).Set(1)
	c.version = v
}
