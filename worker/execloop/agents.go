package execloop

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// invocation is everything an agent's command line is built from.
type invocation struct {
	Prompt    string
	Model     string // empty: the agent's default
	Resume    string // session/thread id to resume; empty: a fresh run
	Provider  *config.ProviderConfig
	APIKey    string // the provider key's value; only ever put into the child's environment
	MaxTurns  int    // 0: no cap passed
	MaxUSD    float64
	UserArgs  []string
	Workspace string
	Sandboxed bool // outerloop's own sandbox confines the agent
}

// driver knows one agent: its usual binary, its command line and environment, its parser.
type driver struct {
	name      string
	bin       string
	resumable bool
	stdin     bool // the prompt goes on stdin (else it is an argument)
	args      func(inv invocation) []string
	env       func(inv invocation) map[string]string
	parser    func(prices config.Prices) parser
}

// drivers returns the agent drivers by name.
func drivers() map[string]driver {
	return map[string]driver{
		"codex":   {name: "codex", bin: "codex", resumable: true, stdin: true, args: codexArgs, env: codexEnv, parser: func(p config.Prices) parser { return &codexParser{prices: p} }},
		"claude":  {name: "claude", bin: "claude", resumable: true, stdin: true, args: claudeArgs, env: claudeEnv, parser: func(p config.Prices) parser { return &claudeParser{prices: p} }},
		"aider":   {name: "aider", bin: "aider", args: aiderArgs, env: aiderEnv, parser: func(config.Prices) parser { return &aiderParser{} }},
		"command": {name: "command", stdin: true, args: func(inv invocation) []string { return inv.UserArgs }, env: commandEnv, parser: func(config.Prices) parser { return &commandParser{} }},
	}
}

// hasFlag reports whether args set any of the flags (as "--flag", "--flag=…" or "-c key=…").
func hasFlag(args []string, flags ...string) bool {
	for i, a := range args {
		for _, f := range flags {
			if a == f || strings.HasPrefix(a, f+"=") {
				return true
			}
			// Codex config overrides: "-c sandbox_mode=…".
			if (a == "-c" || a == "--config") && i+1 < len(args) && strings.HasPrefix(args[i+1], f+"=") {
				return true
			}
		}
	}
	return false
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string { return strconv.Quote(s) }

// codexProviderID names the model provider outerloop defines on Codex's command line.
const codexProviderID = "outerloop"

func codexArgs(inv invocation) []string {
	args := []string{"exec"}
	if inv.Resume != "" {
		args = append(args, "resume")
	}
	args = append(args, "--json", "--skip-git-repo-check",
		"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false")
	// "resume" takes no --sandbox, so use the config key. Inside outerloop's sandbox Codex's
	// own (bubblewrap again, nested) adds nothing our namespaces do not already give and may
	// not start there: full access to what our sandbox lets it see. Unconfined, Codex's
	// sandbox keeps it to the workspace.
	if !hasFlag(inv.UserArgs, "--sandbox", "-s", "sandbox_mode", "--dangerously-bypass-approvals-and-sandbox") {
		if inv.Sandboxed {
			args = append(args, "-c", `sandbox_mode="danger-full-access"`)
		} else {
			args = append(args, "-c", `sandbox_mode="workspace-write"`)
		}
	}
	if p := inv.Provider; p != nil && p.BaseURL != "" && !hasFlag(inv.UserArgs, "model_provider") {
		def := fmt.Sprintf(`{name=%s,base_url=%s,wire_api="responses"`, tomlString(codexProviderID), tomlString(p.BaseURL))
		if p.APIKeyEnv != "" {
			def += ",env_key=" + tomlString(p.APIKeyEnv)
		}
		def += "}"
		args = append(args, "-c", "model_provider="+codexProviderID, "-c", "model_providers."+codexProviderID+"="+def)
	}
	if inv.Model != "" && !hasFlag(inv.UserArgs, "-m", "--model") {
		args = append(args, "-m", inv.Model)
	}
	args = append(args, inv.UserArgs...)
	if inv.Resume != "" {
		args = append(args, inv.Resume)
	}
	return append(args, "-") // the prompt is read from stdin
}

func codexEnv(inv invocation) map[string]string {
	env := map[string]string{}
	if p := inv.Provider; p != nil && p.APIKeyEnv != "" && inv.APIKey != "" {
		env[p.APIKeyEnv] = inv.APIKey
	}
	return env
}

func claudeArgs(inv invocation) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if inv.Resume != "" {
		args = append(args, "--resume", inv.Resume)
	}
	if inv.Model != "" && !hasFlag(inv.UserArgs, "--model") {
		args = append(args, "--model", inv.Model)
	}
	if inv.MaxTurns > 0 && !hasFlag(inv.UserArgs, "--max-turns") {
		args = append(args, "--max-turns", strconv.Itoa(inv.MaxTurns))
	}
	if inv.MaxUSD > 0 && !hasFlag(inv.UserArgs, "--max-budget-usd") {
		args = append(args, "--max-budget-usd", strconv.FormatFloat(inv.MaxUSD, 'f', -1, 64))
	}
	return append(args, inv.UserArgs...) // the prompt is read from stdin
}

func claudeEnv(inv invocation) map[string]string {
	env := map[string]string{
		// No telemetry, error reports, update checks or other traffic beyond the model API.
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	if p := inv.Provider; p != nil {
		if p.BaseURL != "" {
			env["ANTHROPIC_BASE_URL"] = p.BaseURL
		}
		if inv.APIKey != "" {
			env["ANTHROPIC_API_KEY"] = inv.APIKey
		}
	}
	return env
}

func aiderArgs(inv invocation) []string {
	args := []string{"--message", inv.Prompt, "--yes-always", "--no-pretty", "--no-stream",
		"--no-check-update", "--no-show-release-notes", "--analytics-disable"}
	if inv.Model != "" && !hasFlag(inv.UserArgs, "--model") {
		args = append(args, "--model", inv.Model)
	}
	if p := inv.Provider; p != nil && p.BaseURL != "" && !hasFlag(inv.UserArgs, "--openai-api-base") && p.Kind != "anthropic" {
		args = append(args, "--openai-api-base", p.BaseURL)
	}
	return append(args, inv.UserArgs...)
}

func aiderEnv(inv invocation) map[string]string {
	env := map[string]string{}
	if p := inv.Provider; p != nil && inv.APIKey != "" {
		if p.Kind == workitems.ProviderAnthropic {
			env["ANTHROPIC_API_KEY"] = inv.APIKey
		} else {
			env["OPENAI_API_KEY"] = inv.APIKey
		}
	}
	return env
}

func commandEnv(inv invocation) map[string]string {
	env := map[string]string{UsageFDEnv: "3", "OUTERLOOP_PROMPT": inv.Prompt}
	if p := inv.Provider; p != nil && p.APIKeyEnv != "" && inv.APIKey != "" {
		env[p.APIKeyEnv] = inv.APIKey
	}
	return env
}

// agentNames lists the agents New knows, for error messages.
func agentNames() []string {
	var ns []string
	for n := range drivers() {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// turnsCap converts a remaining model-call budget to a whole number of turns (at least 1).
func turnsCap(remaining float64) int {
	if remaining <= 0 {
		return 0
	}
	return max(1, int(math.Floor(remaining)))
}
