package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"outerloop/workitems"
)

// SandboxLimits bound what one command may use: `sandbox: {limits: {memory: 4GiB, processes:
// 1024, cpu_time: 1h, file_size: 4GiB}}`. Values are kept as written (events and exits quote
// them); an empty one inherits (template → deployment → DefaultSandboxLimits) and `unlimited`
// lifts the limit. Sizes take a B, KiB, MiB, GiB or TiB suffix; cpu_time is a Go duration.
type SandboxLimits struct {
	Memory    string `yaml:"memory" json:"memory,omitempty"`       // of the command and everything it starts
	Processes string `yaml:"processes" json:"processes,omitempty"` // tasks (processes and threads) at once
	CPUTime   string `yaml:"cpu_time" json:"cpu_time,omitempty"`   // CPU time of each process
	FileSize  string `yaml:"file_size" json:"file_size,omitempty"` // largest file a process may write
}

// Unlimited is the value that lifts a limit.
const Unlimited = "unlimited"

// DefaultSandboxLimits are the limits of a command whose template and deployment name none:
// high enough for a large Go or Node build (the Go toolchain runs many threads, and processes
// counts threads), low enough that a runaway command cannot take the host down.
func DefaultSandboxLimits() SandboxLimits {
	return SandboxLimits{Memory: "4GiB", Processes: "1024", CPUTime: "1h", FileSize: "4GiB"}
}

// ResourceLimits are parsed limits; a zero field is no limit.
type ResourceLimits struct {
	Memory    int64 // bytes
	Processes int64
	CPUTime   time.Duration
	FileSize  int64 // bytes
	// Written are the values as configured, for events and messages.
	Written SandboxLimits
}

// Get returns l's value as written for one limit.
func (l SandboxLimits) Get(k workitems.Limit) string {
	switch k {
	case workitems.LimitMemory:
		return l.Memory
	case workitems.LimitProcesses:
		return l.Processes
	case workitems.LimitCPUTime:
		return l.CPUTime
	case workitems.LimitFileSize:
		return l.FileSize
	}
	return ""
}

// Merge returns l with its empty fields taken from base.
func (l SandboxLimits) Merge(base SandboxLimits) SandboxLimits {
	if l.Memory == "" {
		l.Memory = base.Memory
	}
	if l.Processes == "" {
		l.Processes = base.Processes
	}
	if l.CPUTime == "" {
		l.CPUTime = base.CPUTime
	}
	if l.FileSize == "" {
		l.FileSize = base.FileSize
	}
	return l
}

// Resolve merges l over the defaults and parses it.
func (l SandboxLimits) Resolve() (ResourceLimits, error) {
	l = l.Merge(DefaultSandboxLimits())
	out := ResourceLimits{Written: l}
	var err error
	if out.Memory, err = parseLimitSize(workitems.LimitMemory, l.Memory, 16<<20); err != nil {
		return out, err
	}
	if out.FileSize, err = parseLimitSize(workitems.LimitFileSize, l.FileSize, 1<<10); err != nil {
		return out, err
	}
	if l.Processes != Unlimited {
		n, err := strconv.ParseInt(l.Processes, 10, 64)
		if err != nil || n < 16 {
			return out, fmt.Errorf("limits: processes %q is not a whole number of at least 16 (or %s)", l.Processes, Unlimited)
		}
		out.Processes = n
	}
	if l.CPUTime != Unlimited {
		d, err := time.ParseDuration(l.CPUTime)
		if err != nil || d < time.Second {
			return out, fmt.Errorf("limits: cpu_time %q is not a duration of at least 1s (30m, 2h) or %s", l.CPUTime, Unlimited)
		}
		out.CPUTime = d
	}
	return out, nil
}

func (l SandboxLimits) validate() error {
	_, err := l.Resolve()
	return err
}

// sizeUnit is a suffix a size may carry.
type sizeUnit struct {
	suffix string
	mult   int64
}

// sizeUnits lists the suffixes, longest first so that "MiB" is not read as "B".
func sizeUnits() []sizeUnit {
	return []sizeUnit{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
}

// ParseSize parses a size with a binary unit: 512MiB, 4GiB, 1048576B, or a bare number of bytes.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits() {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (use 512MiB, 4GiB)", s)
	}
	return n * mult, nil
}

func parseLimitSize(k workitems.Limit, v string, least int64) (int64, error) {
	if v == Unlimited {
		return 0, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("limits: %s %q is not a size (512MiB, 4GiB) or %s", k, v, Unlimited)
	}
	if n < least {
		return 0, fmt.Errorf("limits: %s %q is below the least allowed, %d bytes", k, v, least)
	}
	return n, nil
}
