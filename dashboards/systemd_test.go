package dashboards

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// workerUnit is the example systemd unit of a worker on a host.
const workerUnit = "deploy/systemd/outerloop-worker.service"

// unitFile is a systemd unit: each section's keys with their values in file order.
type unitFile map[string]map[string][]string

// value returns the last value of key in section ("" when unset): systemd's rule for a
// setting given twice.
func (u unitFile) value(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" || strings.HasSuffix(l, `\`) {
				t.Fatalf("%s:%d: %q is not KEY=VALUE in a section (continued lines are not used here)", path, n, l)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// The worker's unit runs it as an unprivileged user, hardened, with the work dir writable and
// everything the sandbox needs to create its namespaces left allowed.
func TestTheSystemdUnitRunsTheWorkerUnprivilegedWithASandboxThatStarts(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, filepath.Join(repoRoot, workerUnit))
	svc := func(k string) string { return u.value("Service", k) }
	switch user := svc("User"); {
	case user == "root" || user == "0":
		t.Errorf("User=%s: the worker must run as an unprivileged user", user)
	case user == "" && svc("DynamicUser") != "yes":
		t.Error("neither User= nor DynamicUser=yes: the worker would run as root")
	}
	for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
		"KillMode": "mixed", "CapabilityBoundingSet": ""} {
		if got, set := u["Service"][k]; !set || svc(k) != want {
			t.Errorf("%s=%q (set: %v), want %q", k, got, set, want)
		}
	}
	if svc("EnvironmentFile") == "" {
		t.Error("no EnvironmentFile=: secrets would go into the unit itself")
	}

	args := strings.Fields(svc("ExecStart"))
	if !slices.Contains(args, "worker") {
		t.Fatalf("ExecStart=%q does not run outerloop worker", svc("ExecStart"))
	}
	workdir := ""
	if i := slices.Index(args, "--workdir"); i >= 0 && i+1 < len(args) {
		workdir = args[i+1]
	}
	if workdir == "" {
		t.Fatalf("ExecStart=%q gives no --workdir (the default under /tmp is private to the unit)", svc("ExecStart"))
	}
	writable := slices.ContainsFunc(strings.Fields(strings.Join(u["Service"]["ReadWritePaths"], " ")), func(p string) bool {
		return workdir == p || strings.HasPrefix(workdir, strings.TrimPrefix(p, "-")+"/")
	})
	if !writable {
		t.Errorf("the work dir %s is not under ReadWritePaths=%q: ProtectSystem=strict keeps it read-only", workdir, u["Service"]["ReadWritePaths"])
	}

	// bubblewrap's needs: its namespaces, its mount calls and a /proc it can mount again.
	if rn, set := u["Service"]["RestrictNamespaces"]; set {
		allowed := strings.Fields(svc("RestrictNamespaces"))
		if strings.HasPrefix(svc("RestrictNamespaces"), "~") || svc("RestrictNamespaces") == "yes" {
			t.Errorf("RestrictNamespaces=%q denies namespaces bubblewrap creates", rn)
		} else if svc("RestrictNamespaces") != "no" {
			for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
				if !slices.Contains(allowed, ns) {
					t.Errorf("RestrictNamespaces=%q does not allow %s, which bubblewrap creates", svc("RestrictNamespaces"), ns)
				}
			}
		}
	}
	if _, set := u["Service"]["SystemCallFilter"]; set {
		t.Errorf("SystemCallFilter=%q: the sets that fit a service lack mount and the namespace calls bubblewrap makes", u["Service"]["SystemCallFilter"])
	}
	for k, why := range map[string]string{
		"ProtectKernelTunables":  "a /proc covered by mounts cannot be mounted again in the sandbox",
		"ProtectKernelLogs":      "a /proc covered by mounts cannot be mounted again in the sandbox",
		"ProtectProc":            "a /proc mounted with hidepid cannot be mounted again in the sandbox",
		"ProtectControlGroups":   "a read-only /sys/fs/cgroup leaves the delegated group unused",
		"MemoryDenyWriteExecute": "every command inherits it, and JITs fail",
	} {
		if v := svc(k); v != "" && v != "no" && v != "default" {
			t.Errorf("%s=%s: %s", k, v, why)
		}
	}
}

// systemd-analyze verify accepts the unit: every key known, every value parsed. It checks that
// ExecStart's program exists, so the copy it reads runs the outerloop this test builds, with the
// unit's own arguments, which the CLI must take.
func TestSystemdAnalyzeVerifiesTheUnit(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): the unit's settings are checked by TestTheSystemdUnitRunsTheWorkerUnprivilegedWithASandboxThatStarts only")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH to build cmd/outerloop")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "outerloop")
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "./cmd/outerloop")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/outerloop: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, workerUnit))
	if err != nil {
		t.Fatal(err)
	}
	const installed = "ExecStart=/usr/local/bin/outerloop "
	if !strings.Contains(string(b), installed) {
		t.Fatalf("%s does not start %q", workerUnit, installed)
	}
	unit := filepath.Join(dir, filepath.Base(workerUnit))
	if err := os.WriteFile(unit, []byte(strings.Replace(string(b), installed, "ExecStart="+bin+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	args := strings.Fields(parseUnit(t, unit).value("Service", "ExecStart"))[1:]
	sub := slices.Index(args, "worker")
	help, err := exec.CommandContext(t.Context(), bin, "worker", "--help").CombinedOutput()
	if sub < 0 || err != nil {
		t.Fatalf("outerloop worker --help: %v\n%s", err, help)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--") && !strings.Contains(string(help), a+" ") {
			t.Errorf("outerloop worker does not take %s (ExecStart=%q)", a, strings.Join(args, " "))
		}
	}
}
