package dashboards

import (
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"outerloop/workitems/config"
)

// No Docker engine runs in CI: these tests read docker-compose.yml and the files it mounts the
// way compose and the containers would, and check that they fit together.

const repoRoot = ".."

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image         string            `yaml:"image"`
	Build         *composeBuild     `yaml:"build"`
	Command       []string          `yaml:"command"`
	Environment   map[string]string `yaml:"environment"`
	Ports         []string          `yaml:"ports"`
	Volumes       []string          `yaml:"volumes"`
	ContainerName string            `yaml:"container_name"`
	User          string            `yaml:"user"`
	Deploy        map[string]any    `yaml:"deploy"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// mount is one "source:target[:mode]" volume entry.
type mount struct {
	source, target, mode string
	bind                 bool
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func parseMount(s string) (mount, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return mount{}, false
	}
	m := mount{source: parts[0], target: parts[1]}
	if len(parts) == 3 {
		m.mode = parts[2]
	}
	m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
	return m, true
}

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		m, ok := parseMount(v)
		if !ok {
			t.Errorf("volume %q is not source:target[:mode]", v)
			continue
		}
		out = append(out, m)
	}
	return out
}

// hostFile returns the repository path mounted at container path p, if any.
func (s composeService) hostFile(t *testing.T, p string) (string, bool) {
	for _, m := range s.mounts(t) {
		if !m.bind {
			continue
		}
		if p == m.target {
			return filepath.Join(repoRoot, m.source), true
		}
		if rest, ok := strings.CutPrefix(p, m.target+"/"); ok {
			return filepath.Join(repoRoot, m.source, rest), true
		}
	}
	return "", false
}

var portRE = regexp.MustCompile(`^(?:(\d{1,3}(?:\.\d{1,3}){3}):)?(?:(\d+):)?(\d+)(?:/(tcp|udp))?$`)

func TestComposeServicesAreComplete(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	for _, want := range []string{"redis", "scheduler", "worker", "api", "prometheus", "alertmanager", "grafana"} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("service %s is missing", want)
		}
	}
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		t.Run(name+" can be built or pulled and its mounts exist", func(t *testing.T) {
			if s.Image == "" && s.Build == nil {
				t.Error("neither image nor build")
			}
			if s.Build != nil {
				ctx := filepath.Join(repoRoot, s.Build.Context)
				if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
					t.Errorf("build context %q: not a directory (%v)", s.Build.Context, err)
				}
				df := cmp(s.Build.Dockerfile, "Dockerfile")
				if _, err := os.Stat(filepath.Join(ctx, df)); err != nil {
					t.Errorf("dockerfile: %v", err)
				}
			}
			for _, m := range s.mounts(t) {
				if !path.IsAbs(m.target) {
					t.Errorf("volume target %q is not absolute", m.target)
				}
				if m.mode != "" && m.mode != "ro" && m.mode != "rw" {
					t.Errorf("volume %s: mode %q", m.source, m.mode)
				}
				if m.bind {
					if _, err := os.Stat(filepath.Join(repoRoot, m.source)); err != nil {
						t.Errorf("bind mount source %s: %v", m.source, err)
					}
				} else if _, ok := c.Volumes[m.source]; !ok {
					t.Errorf("named volume %s is not declared under volumes", m.source)
				}
			}
			for _, p := range s.Ports {
				m := portRE.FindStringSubmatch(p)
				if m == nil {
					t.Errorf("port %q is malformed", p)
					continue
				}
				for _, n := range m[2:4] {
					if v, err := strconv.Atoi(n); n != "" && (err != nil || v < 1 || v > 65535) {
						t.Errorf("port %q: %s is out of range", p, n)
					}
				}
			}
		})
		for _, p := range s.Ports {
			if m := portRE.FindStringSubmatch(p); m != nil && m[2] != "" {
				if other, dup := hostPorts[m[2]]; dup {
					t.Errorf("host port %s is published by %s and %s", m[2], other, name)
				}
				hostPorts[m[2]] = name
			}
		}
	}
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func TestComposeRunsTheRightProcesses(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	tests := []struct {
		service string
		command string // the outerloop subcommand
	}{
		{"scheduler", "scheduler"},
		{"worker", "worker"},
		{"api", "serve"},
	}
	for _, tt := range tests {
		t.Run(tt.service+" runs outerloop "+tt.command+" with the mounted config", func(t *testing.T) {
			t.Parallel()
			s := c.Services[tt.service]
			if !slices.Contains(s.Command, tt.command) {
				t.Errorf("command %q does not run %s", s.Command, tt.command)
			}
			i := slices.Index(s.Command, "--config")
			if i < 0 || i+1 >= len(s.Command) {
				t.Fatalf("command %q has no --config", s.Command)
			}
			host, ok := s.hostFile(t, s.Command[i+1])
			if !ok {
				t.Fatalf("config %s is not mounted from the repository", s.Command[i+1])
			}
			if _, err := config.LoadConfig(host); err != nil {
				t.Errorf("the mounted config does not load: %v", err)
			}
			if s.Environment["REDIS_URL"] != "redis://redis:6379/0" {
				t.Errorf("REDIS_URL = %q, want the redis service", s.Environment["REDIS_URL"])
			}
		})
	}

	t.Run("the worker scales: no fixed name, no host port, no replica pin", func(t *testing.T) {
		t.Parallel()
		w := c.Services["worker"]
		if w.ContainerName != "" {
			t.Errorf("container_name %q: --scale worker=3 would clash", w.ContainerName)
		}
		if len(w.Ports) > 0 {
			t.Errorf("ports %q: replicas would fight over the host port", w.Ports)
		}
		if _, pinned := w.Deploy["replicas"]; pinned {
			t.Error("deploy.replicas pins the worker count")
		}
	})

	t.Run("the worker runs as the image's unprivileged user", func(t *testing.T) {
		t.Parallel()
		img := loadImageUser(t)
		if img.user == "0" || img.user == "root" || img.user == "" {
			t.Fatalf("the Dockerfile's USER is %q: the image runs as root", img.user)
		}
		if want := img.uid + ":" + img.gid; c.Services["worker"].User != want {
			t.Errorf("worker user %q, want the image's %s (useradd %s)", c.Services["worker"].User, want, img.name)
		}
		if img.user != img.uid+":"+img.gid {
			t.Errorf("the Dockerfile's USER %q is not the uid:gid %s:%s it creates for %s", img.user, img.uid, img.gid, img.name)
		}
	})

	t.Run("redis keeps every accepted item and never evicts", func(t *testing.T) {
		t.Parallel()
		cmd := strings.Join(c.Services["redis"].Command, " ")
		for _, want := range []string{"--appendonly yes", "--maxmemory-policy noeviction"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("redis command %q lacks %q", cmd, want)
			}
		}
		if !slices.ContainsFunc(c.Services["redis"].Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
			t.Error("redis /data is not on a volume: the AOF would die with the container")
		}
	})

	t.Run("the api listens on all interfaces at the published port", func(t *testing.T) {
		t.Parallel()
		api := c.Services["api"]
		i := slices.Index(api.Command, "--addr")
		if i < 0 || i+1 >= len(api.Command) {
			t.Fatalf("api command %q has no --addr", api.Command)
		}
		host, port, err := net.SplitHostPort(api.Command[i+1])
		if err != nil || host != "0.0.0.0" {
			t.Fatalf("--addr %q: want 0.0.0.0:PORT (%v)", api.Command[i+1], err)
		}
		if !slices.ContainsFunc(api.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
			t.Errorf("ports %q do not publish container port %s", api.Ports, port)
		}
	})
}

// prometheusConfig is the part of prometheus.yml the stack checks read.
type prometheusConfig struct {
	RuleFiles []string `yaml:"rule_files"`
	Alerting  struct {
		Alertmanagers []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"alertmanagers"`
	} `yaml:"alerting"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

const promConfigPath = "/etc/prometheus/prometheus.yml"

func loadPrometheusConfig(t *testing.T, c composeFile) (prometheusConfig, string) {
	t.Helper()
	i := slices.IndexFunc(c.Services["prometheus"].Command, func(a string) bool {
		return a == "--config.file="+promConfigPath
	})
	if i < 0 {
		t.Fatalf("prometheus does not run with --config.file=%s", promConfigPath)
	}
	host, ok := c.Services["prometheus"].hostFile(t, promConfigPath)
	if !ok {
		t.Fatalf("%s is not mounted from the repository", promConfigPath)
	}
	b, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	var pc prometheusConfig
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	return pc, host
}

func TestPrometheusLoadsTheRulesAndScrapesTheServices(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	pc, _ := loadPrometheusConfig(t, c)
	prom := c.Services["prometheus"]

	t.Run("every rule file glob matches the mounted alerts.yml", func(t *testing.T) {
		t.Parallel()
		found := false
		for _, glob := range pc.RuleFiles {
			if !path.IsAbs(glob) {
				glob = path.Join(path.Dir(promConfigPath), glob)
			}
			for _, m := range prom.mounts(t) {
				if ok, _ := path.Match(glob, m.target); ok && filepath.Clean(m.source) == filepath.Join("dashboards", Rules) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("rule_files %q match no mount of dashboards/%s", pc.RuleFiles, Rules)
		}
	})

	t.Run("every scrape and alerting target is a compose service at its metrics port", func(t *testing.T) {
		t.Parallel()
		metricsPort := map[string]string{"prometheus": "9090", "alertmanager": "9093"}
		for name, s := range c.Services {
			for _, flag := range []string{"--addr", "--metrics-addr"} { // serve's HTTP, a worker's /metrics
				if i := slices.Index(s.Command, flag); i >= 0 && i+1 < len(s.Command) {
					_, p, _ := net.SplitHostPort(s.Command[i+1])
					metricsPort[name] = p
				}
			}
		}
		check := func(job, host, port string) {
			if host == "localhost" && job == "prometheus" {
				return
			}
			if _, ok := c.Services[host]; !ok {
				t.Errorf("job %s: %s is not a compose service", job, host)
			} else if metricsPort[host] != port {
				t.Errorf("job %s: %s:%s, but %s serves on port %q", job, host, port, host, metricsPort[host])
			}
		}
		jobs := map[string]bool{}
		for _, sc := range pc.ScrapeConfigs {
			jobs[sc.JobName] = true
			for _, st := range sc.StaticConfigs {
				for _, tg := range st.Targets {
					h, p, err := net.SplitHostPort(tg)
					if err != nil {
						t.Errorf("job %s: target %q: %v", sc.JobName, tg, err)
						continue
					}
					check(sc.JobName, h, p)
				}
			}
			for _, d := range sc.DNSSDConfigs {
				for _, n := range d.Names {
					check(sc.JobName, n, strconv.Itoa(d.Port))
				}
			}
		}
		for _, want := range []string{"outerloop-api", "outerloop-worker"} {
			if !jobs[want] {
				t.Errorf("no scrape job %s (the dashboards and OuterloopTargetDown select job=~\"outerloop.*\")", want)
			}
		}
		for _, am := range pc.Alerting.Alertmanagers {
			for _, st := range am.StaticConfigs {
				for _, tg := range st.Targets {
					h, p, _ := net.SplitHostPort(tg)
					check("alerting", h, p)
				}
			}
		}
	})

	t.Run("promtool accepts the config with the rules where the container has them", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, m := range prom.mounts(t) {
			if !m.bind || !strings.HasPrefix(m.target, "/etc/prometheus/") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(repoRoot, m.source))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, strings.TrimPrefix(m.target, "/etc/prometheus/"))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := runPromtool(t, dir, "check", "config", "prometheus.yml")
		if err != nil {
			t.Fatalf("promtool check config: %v\n%s", err, out)
		}
		if !strings.Contains(out, "1 rule files found") {
			t.Errorf("promtool found no rule file:\n%s", out)
		}
	})
}

func TestGrafanaIsProvisioned(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	g := c.Services["grafana"]
	provDir, ok := g.hostFile(t, "/etc/grafana/provisioning")
	if !ok {
		t.Fatal("/etc/grafana/provisioning is not mounted from the repository")
	}

	t.Run("the dashboard provider points at the mounted dashboards", func(t *testing.T) {
		t.Parallel()
		var prov struct {
			Providers []struct {
				Type    string `yaml:"type"`
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		readYAML(t, filepath.Join(provDir, "dashboards", "outerloop.yml"), &prov)
		if len(prov.Providers) == 0 {
			t.Fatal("no dashboard provider")
		}
		for _, p := range prov.Providers {
			host, ok := g.hostFile(t, p.Options.Path)
			if p.Type != "file" || !ok {
				t.Errorf("provider %s path %q is not a mounted directory", p.Type, p.Options.Path)
				continue
			}
			for _, d := range Dashboards() {
				if _, err := os.Stat(filepath.Join(host, d)); err != nil {
					t.Errorf("dashboard %s is not under the provider path: %v", d, err)
				}
			}
		}
	})

	t.Run("the datasource is the compose prometheus, with uid and exemplar links", func(t *testing.T) {
		t.Parallel()
		var ds struct {
			Datasources []struct {
				Type     string `yaml:"type"`
				URL      string `yaml:"url"`
				UID      string `yaml:"uid"`
				JSONData struct {
					Exemplars []struct {
						Name string `yaml:"name"`
						URL  string `yaml:"url"`
					} `yaml:"exemplarTraceIdDestinations"`
				} `yaml:"jsonData"`
			} `yaml:"datasources"`
		}
		readYAML(t, filepath.Join(provDir, "datasources", "prometheus.yml"), &ds)
		if len(ds.Datasources) != 1 {
			t.Fatalf("%d datasources, want 1", len(ds.Datasources))
		}
		d := ds.Datasources[0]
		if d.Type != "prometheus" || d.URL != "http://prometheus:9090" || d.UID == "" {
			t.Errorf("datasource %+v, want type prometheus at http://prometheus:9090 with a uid", d)
		}
		if len(d.JSONData.Exemplars) != 1 || d.JSONData.Exemplars[0].Name != "item_id" ||
			!strings.Contains(d.JSONData.Exemplars[0].URL, "$${__value.raw}") {
			// $$: Grafana expands $VAR in provisioning files; the link needs a literal ${__value.raw}.
			t.Errorf("exemplar links %+v, want item_id linking with an escaped $${__value.raw}", d.JSONData.Exemplars)
		}
	})
}

func TestAlertmanagerRoutesToADefinedReceiver(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	host, ok := c.Services["alertmanager"].hostFile(t, "/etc/alertmanager/alertmanager.yml")
	if !ok {
		t.Fatal("alertmanager.yml is not mounted from the repository")
	}
	var am struct {
		Route struct {
			Receiver string `yaml:"receiver"`
			Routes   []struct {
				Receiver string `yaml:"receiver"`
			} `yaml:"routes"`
		} `yaml:"route"`
		Receivers []struct {
			Name string `yaml:"name"`
		} `yaml:"receivers"`
		InhibitRules []struct {
			SourceMatchers []string `yaml:"source_matchers"`
		} `yaml:"inhibit_rules"`
	}
	readYAML(t, host, &am)
	names := map[string]bool{}
	for _, r := range am.Receivers {
		names[r.Name] = true
	}
	want := []string{am.Route.Receiver}
	for _, r := range am.Route.Routes {
		want = append(want, r.Receiver)
	}
	for _, r := range want {
		if !names[r] {
			t.Errorf("route uses receiver %q, which is not defined", r)
		}
	}
	alerts := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
		}
	}
	nameRE := regexp.MustCompile(`alertname="(\w+)"`)
	for _, ir := range am.InhibitRules {
		for _, m := range ir.SourceMatchers {
			if n := nameRE.FindStringSubmatch(m); n != nil && !alerts[n[1]] {
				t.Errorf("inhibit rule names alert %s, which %s does not define", n[1], Rules)
			}
		}
	}
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func TestComposeCommandsUseFlagsTheCLIHas(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH to build cmd/outerloop")
	}
	bin := filepath.Join(t.TempDir(), "outerloop")
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "./cmd/outerloop")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/outerloop: %v\n%s", err, out)
	}
	c := loadCompose(t)
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		t.Run(name+" runs a subcommand with flags it accepts", func(t *testing.T) {
			t.Parallel()
			sub := slices.IndexFunc(s.Command, func(a string) bool { return !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "/") })
			if sub < 0 {
				t.Fatalf("command %q names no subcommand", s.Command)
			}
			help, err := exec.CommandContext(t.Context(), bin, s.Command[sub], "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("outerloop %s --help: %v\n%s", s.Command[sub], err, help)
			}
			for _, a := range s.Command {
				flag, _, _ := strings.Cut(a, "=")
				if strings.HasPrefix(flag, "--") && !strings.Contains(string(help), flag+" ") {
					t.Errorf("outerloop %s does not take %s:\n%s", s.Command[sub], flag, help)
				}
			}
		})
	}
}

// imageUser is who the Dockerfile's final stage runs as, and the user it creates.
type imageUser struct {
	user           string // USER
	name, uid, gid string // from groupadd --gid and useradd --uid --gid
}

var (
	userRE     = regexp.MustCompile(`(?m)^USER\s+(\S+)\s*$`)
	useraddRE  = regexp.MustCompile(`useradd\b[^&\n]*--uid (\d+) --gid (\d+) (\w+)`)
	groupaddRE = regexp.MustCompile(`groupadd --gid (\d+) (\w+)`)
)

func loadImageUser(t *testing.T) imageUser {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	final := string(b)
	if i := strings.LastIndex(final, "\nFROM "); i >= 0 {
		final = final[i:]
	}
	var u imageUser
	if m := userRE.FindAllStringSubmatch(final, -1); len(m) > 0 {
		u.user = m[len(m)-1][1]
	}
	m := useraddRE.FindStringSubmatch(final)
	g := groupaddRE.FindStringSubmatch(final)
	if m == nil || g == nil {
		t.Fatal("the Dockerfile's final stage creates no user with groupadd --gid N NAME and useradd --uid N --gid N NAME")
	}
	u.uid, u.gid, u.name = m[1], m[2], m[3]
	if g[1] != u.gid || g[2] != u.name {
		t.Fatalf("groupadd makes %s with gid %s; useradd gives %s gid %s", g[2], g[1], u.name, u.gid)
	}
	return u
}
