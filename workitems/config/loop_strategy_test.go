package config

import (
	"strings"
	"testing"
)

// TestLoopModelAndPromptVariantAreAcceptedWhereTheCodeHonoursThem: loop.model is taken by the
// agent loop and by exec agents whose command line has a model flag, refused for a script
// loop and for agent command naming why; loop.prompt_variant is one line for any kind; a new
// item's first attempt starts from both.
func TestLoopModelAndPromptVariantAreAcceptedWhereTheCodeHonoursThem(t *testing.T) {
	t.Parallel()
	parse := func(loop string) (*Config, error) {
		return ParseConfig([]byte(`
defaults: {budget: {wall_time: 5m}}
providers:
  p: {kind: openai-chat, base_url: http://127.0.0.1:1/v1, model: big}
templates:
  - name: t
    repo: https://example.com/r.git
    goal: g
    loop: ` + loop + `
    done_check: {commands: ["true"]}
`))
	}
	for _, loop := range []string{
		`{kind: agent, provider: p, model: gpt-5-mini, prompt_variant: minimal-diff}`,
		`{kind: exec, agent: codex, model: gpt-5-mini}`,
		`{kind: exec, agent: claude, model: sonnet, prompt_variant: stabilise}`,
		`{kind: exec, agent: aider, model: gpt-5-mini}`,
		`{kind: exec, agent: command, command: x, prompt_variant: minimal-diff}`,
		`{kind: script, commands: ["true"], prompt_variant: minimal-diff}`,
	} {
		cfg, err := parse(loop)
		if err != nil {
			t.Errorf("%s: %v", loop, err)
			continue
		}
		tmpl, _ := cfg.Template("t")
		s := tmpl.FirstStrategy()
		if s.Model != tmpl.Loop.Model || s.PromptVariant != tmpl.Loop.PromptVariant || s.Loop != "" || s.Scope != "" {
			t.Errorf("%s: first strategy %+v", loop, s)
		}
	}
	for _, tc := range []struct{ loop, want string }{
		{`{kind: script, commands: ["true"], model: gpt-5-mini}`, `loop.model: a script loop calls no model`},
		{`{kind: exec, agent: command, command: x, model: gpt-5-mini}`, `loop.model: agent command has no model flag`},
		{`{kind: agent, provider: p, model: "gpt 5"}`, `loop.model: "gpt 5": want a model name without spaces`},
		{`{kind: agent, provider: p, prompt_variant: "a\nb"}`, `loop.prompt_variant: must be one line`},
		{`{kind: agent, provider: p, prompt_variant: "` + strings.Repeat("x", 201) + `"}`, `loop.prompt_variant: 201 bytes: at most 200`},
	} {
		_, err := parse(tc.loop)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %v, want %q", tc.loop, err, tc.want)
		}
	}
}
