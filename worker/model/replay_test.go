package model_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestReplayPlaysTheExampleRecording(t *testing.T) {
	t.Parallel()
	p, err := model.New(config.ProviderConfig{Kind: model.KindReplay, File: "testdata/example_recording.jsonl"}, "recorded", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var deltas []string
	r, err := p.Stream(ctx, userRequest("fix it"), func(d model.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "rec_1" || len(r.ToolCalls()) != 1 || r.ToolCalls()[0].Name != "run_done_check" || r.EndTurn {
		t.Errorf("line 1 = %+v", r)
	}
	if strings.Join(deltas, "") != "Let me run the tests first." {
		t.Errorf("deltas = %q", deltas)
	}
	if want := (model.Usage{InputTokens: 1800, OutputTokens: 40}); r.Usage != want {
		t.Errorf("usage = %+v", r.Usage)
	}
	r, err = p.Stream(ctx, userRequest("next"), nil)
	if err != nil || r.ToolCalls()[0].Arguments != `{"path":"payment/refund.go"}` || r.Usage.CachedInputTokens != 1792 {
		t.Fatalf("line 2 = %+v, %v", r, err)
	}
	_, err = p.Stream(ctx, userRequest("next"), nil)
	var me *model.Error
	if !errors.As(err, &me) || me.Class != workitems.ClassTransient || me.RetryAfter != 3*time.Second || me.StatusCode != 429 ||
		me.Provider != "recorded" {
		t.Fatalf("line 3 err = %+v, want a recorded 429 with a 3s delay", err)
	}
	if model.RetryDelay(1, err, 1) != 3*time.Second {
		t.Errorf("RetryDelay ignores the recorded delay")
	}
	r, err = p.Stream(ctx, userRequest("next"), nil)
	if err != nil || !r.EndTurn || !strings.HasPrefix(r.Text(), "Refunds of expired orders") {
		t.Fatalf("line 4 = %+v, %v", r, err)
	}
	if _, err := p.Stream(ctx, userRequest("more"), nil); !errors.Is(err, model.ErrScriptExhausted) {
		t.Errorf("past the end: err = %v, want ErrScriptExhausted", err)
	}
}

func TestLoadRecording(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		wantErr string
		check   func(t *testing.T, steps []model.ScriptStep)
	}{
		{name: "an omitted end_turn ends the turn for a text answer",
			text: `{"response":{"items":[{"kind":"message","role":"assistant","text":"hi"}]}}`,
			check: func(t *testing.T, s []model.ScriptStep) {
				if !s[0].Response.EndTurn {
					t.Error("EndTurn = false")
				}
			}},
		{name: "an omitted end_turn continues after a tool call",
			text: `{"response":{"items":[{"kind":"function_call","call_id":"c","name":"f","arguments":"{}"}]}}`,
			check: func(t *testing.T, s []model.ScriptStep) {
				if s[0].Response.EndTurn {
					t.Error("EndTurn = true")
				}
			}},
		{name: "an explicit end_turn false is kept",
			text: `{"response":{"items":[{"kind":"message","role":"assistant","text":"more"}],"end_turn":false}}`,
			check: func(t *testing.T, s []model.ScriptStep) {
				if s[0].Response.EndTurn {
					t.Error("EndTurn = true")
				}
			}},
		{name: "retry_after as a number of seconds",
			text: `{"error":{"class":"transient","message":"slow","retry_after":1.5}}`,
			check: func(t *testing.T, s []model.ScriptStep) {
				if model.RetryDelay(1, s[0].Err, 1) != 1500*time.Millisecond {
					t.Errorf("err = %+v", s[0].Err)
				}
			}},
		{name: "error flags are kept",
			text: `{"error":{"class":"invalid_input","message":"full","context_window_exceeded":true}}` + "\n" +
				`{"error":{"class":"permission","message":"pay","quota_exceeded":true}}`,
			check: func(t *testing.T, s []model.ScriptStep) {
				var a, b *model.Error
				if !errors.As(s[0].Err, &a) || !a.ContextWindowExceeded || !errors.As(s[1].Err, &b) || !b.QuotaExceeded {
					t.Errorf("errors = %+v / %+v", s[0].Err, s[1].Err)
				}
			}},
		{name: "a misspelt field is rejected", text: `{"respons":{}}`, wantErr: "line 1"},
		{name: "an unknown item field is rejected", text: "# c\n\n" + `{"response":{"items":[{"kind":"message","txt":"x"}]}}`, wantErr: "line 3"},
		{name: "an unknown error class is rejected", text: `{"error":{"class":"oops"}}`, wantErr: "error class"},
		{name: "a line with neither is rejected", text: `{}`, wantErr: "needs"},
		{name: "a bad retry_after is rejected", text: `{"error":{"class":"transient","retry_after":"soon"}}`, wantErr: "retry_after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			steps, err := model.LoadRecording("r", strings.NewReader(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, steps)
		})
	}
}
