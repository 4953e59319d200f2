package model_test

import (
	"errors"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestNew(t *testing.T) {
	t.Parallel()
	env := func(name string) string {
		if name == "SET_KEY" {
			return "sk-secret-value"
		}
		return ""
	}
	tests := []struct {
		name    string
		cfg     config.ProviderConfig
		wantErr string
		missing bool
	}{
		{name: "builds an openai-responses provider", cfg: config.ProviderConfig{Kind: "openai-responses", APIKeyEnv: "SET_KEY", Model: "m"}},
		{name: "builds an openai-chat provider for a keyless local server",
			cfg: config.ProviderConfig{Kind: "openai-chat", BaseURL: "http://127.0.0.1:11434/v1", Model: "llama"}},
		{name: "builds an anthropic provider", cfg: config.ProviderConfig{Kind: "anthropic", APIKeyEnv: "SET_KEY", Model: "claude"}},
		{name: "builds a replay provider", cfg: config.ProviderConfig{Kind: "replay", File: "testdata/example_recording.jsonl"}},
		{name: "names the unset key variable", cfg: config.ProviderConfig{Kind: "anthropic", APIKeyEnv: "UNSET_KEY"},
			wantErr: "UNSET_KEY", missing: true},
		{name: "rejects an unknown kind", cfg: config.ProviderConfig{Kind: "gemini"}, wantErr: `unknown kind "gemini"`},
		{name: "rejects a replay without a file", cfg: config.ProviderConfig{Kind: "replay"}, wantErr: "recording file"},
		{name: "reports a missing recording", cfg: config.ProviderConfig{Kind: "replay", File: "testdata/nope.jsonl"}, wantErr: "nope.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := model.New(tt.cfg, "prov", env, nil)
			if tt.wantErr == "" {
				if err != nil || p.Name() != "prov" {
					t.Fatalf("New = %v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
			if errors.Is(err, model.ErrMissingKey) != tt.missing {
				t.Errorf("errors.Is(err, ErrMissingKey) = %v", !tt.missing)
			}
		})
	}
}

func TestMissingModelIsInvalidInput(t *testing.T) {
	t.Parallel()
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		t.Run(string(kind)+" refuses to send without a model", func(t *testing.T) {
			t.Parallel()
			fs := newFixtureServer(t)
			p, err := model.New(config.ProviderConfig{Kind: kind, BaseURL: fs.URL}, "p", nil, fs.Client())
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(t.Context(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Class != workitems.ClassInvalidInput || len(fs.requests()) != 0 {
				t.Errorf("err = %v, requests %d; want invalid_input and nothing sent", err, len(fs.requests()))
			}
		})
	}
}

// TestNewBuildsAProviderOfEveryKindTheConfigAccepts: model.New has a case for each of
// workitems.ProviderKinds, so a provider the config accepts is one the worker can build.
func TestNewBuildsAProviderOfEveryKindTheConfigAccepts(t *testing.T) {
	t.Parallel()
	for _, k := range workitems.ProviderKinds() {
		cfg := config.ProviderConfig{Kind: k, Model: "m", File: "testdata/example_recording.jsonl"}
		if _, err := model.New(cfg, "p", func(string) string { return "" }, nil); err != nil {
			t.Errorf("kind %s: %v", k, err)
		}
	}
}
