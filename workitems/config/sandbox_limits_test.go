package config

import (
	"strings"
	"testing"
	"time"
)

func TestSandboxLimitsMergePerKeyOverTheDeploymentsAndTheDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("sandbox: {limits: {memory: 1GiB, processes: 300}}\n" +
		strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {limits: {memory: 256MiB, cpu_time: 90s}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Templates[0].Sandbox.Limits
	if want := (SandboxLimits{Memory: "256MiB", Processes: "300", CPUTime: "90s"}); got != want {
		t.Fatalf("merged limits %+v, want %+v", got, want)
	}
	r, err := got.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Memory != 256<<20 || r.Processes != 300 || r.CPUTime != 90*time.Second || r.FileSize != 4<<30 {
		t.Fatalf("resolved %+v (file_size should be the default 4GiB)", r)
	}
	if r.Written.FileSize != DefaultSandboxLimits().FileSize {
		t.Fatalf("written %+v should carry the default as written", r.Written)
	}
}

func TestSandboxLimitsUnlimitedLiftsALimit(t *testing.T) {
	t.Parallel()
	r, err := SandboxLimits{Memory: Unlimited, Processes: Unlimited, CPUTime: Unlimited, FileSize: Unlimited}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Memory != 0 || r.Processes != 0 || r.CPUTime != 0 || r.FileSize != 0 {
		t.Fatalf("unlimited should resolve to no limit: %+v", r)
	}
}

func TestSandboxLimitsRefuseBadValuesNamingKeyAndValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, key, value string }{
		{"{memory: 2GB}", "memory", `"2GB"`},
		{"{memory: 1KiB}", "memory", `"1KiB"`},
		{"{memory: -5MiB}", "memory", `"-5MiB"`},
		{"{processes: many}", "processes", `"many"`},
		{"{processes: 3}", "processes", `"3"`},
		{"{cpu_time: 30}", "cpu_time", `"30"`},
		{"{file_size: 4gib}", "file_size", `"4gib"`},
	} {
		t.Run(tc.key+" "+tc.value, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(strings.Replace(validTemplate, "goal: do it",
				"goal: do it\n    sandbox: {limits: "+tc.yaml+"}", 1)))
			if err == nil {
				t.Fatal("config loaded")
			}
			for _, w := range []string{`template "t1"`, "sandbox", "limits", tc.key, tc.value} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
	if _, err := ParseConfig([]byte("sandbox: {limits: {memroy: 1GiB}}\n" + validTemplate)); err == nil ||
		!strings.Contains(err.Error(), "memroy") {
		t.Fatalf("an unknown limit key should be refused by name, got %v", err)
	}
}

func TestParseSizeReadsBinaryUnits(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"1B": 1, "2048": 2048, "3KiB": 3 << 10, "256MiB": 256 << 20, "4GiB": 4 << 30, "1TiB": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
