package agentloop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// houseModel is a team's own model provider (a gateway of theirs, say). It is written like
// any provider (see worker/model's Example_provider): here it asks to write the plan, then,
// once it sees the tool's result, answers and ends its turn.
type houseModel struct{ name string }

func (p houseModel) Name() string { return p.name }

func (p houseModel) Stream(_ context.Context, req model.Request, _ func(model.Delta)) (*model.Response, error) {
	for _, it := range req.Input {
		if it.Kind == model.KindFunctionCallOutput { // the write is done: finish
			return &model.Response{Items: []model.Item{{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "Plan written."}},
				EndTurn: true, Usage: model.Usage{InputTokens: 40, OutputTokens: 3}}, nil
		}
	}
	r := model.CallResponse(model.Call("c1", "write_file", `{"path":"PLAN.md","content":"# Plan\n"}`))
	r.Usage = model.Usage{InputTokens: 30, OutputTokens: 12}
	return r, nil
}

// A model provider of a team's own, chosen by the config: the agent loop builds the provider a
// template's loop.provider names through its ProviderFactory. This factory answers "house"
// with the team's provider and leaves every other entry of providers: to model.New (the
// built-in kinds). internal/app registers the agent loop with such a factory; a binary of the
// team's passes its own agent loop in app.Options.Loops under workitems.LoopAgent.
func Example_providerFactory() {
	dir, _ := os.MkdirTemp("", "agentloop-provider-example")
	defer os.RemoveAll(dir)
	cfg := &config.Config{Providers: map[string]config.ProviderConfig{
		"house": {Kind: workitems.ProviderOpenAIChat, BaseURL: "https://models.example.internal/v1", Model: "house-1",
			Prices: config.Prices{InputPerMTok: 1, OutputPerMTok: 2}},
	}}
	factory := func(pc config.ProviderConfig, name string) (model.Provider, error) {
		if name == "house" {
			return houseModel{name: name}, nil
		}
		return model.New(pc, name, os.Getenv, nil)
	}
	loop := agentloop.New(agentloop.WithProviderFactory(factory))

	tmpl := &config.Template{Name: "plan", Goal: "write the plan", Loop: config.Loop{Kind: workitems.LoopAgent, Provider: "house"}}
	a := &worker.Attempt{
		Item: &workitems.Item{ID: "plan@1", Goal: tmpl.Goal}, N: 1, Template: tmpl, Config: cfg, Workspace: dir,
		Meter:       worker.NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute), ModelCalls: 10}, workitems.Spend{}, nil),
		Checkpoints: &checkpoints{},
	}
	ex := loop.Run(context.Background(), a)
	b, _ := os.ReadFile(filepath.Join(dir, "PLAN.md"))
	s := a.Meter.Spent()
	fmt.Println(ex.Reason, "-", ex.LastMessage)
	fmt.Printf("PLAN.md: %q | model calls: %d | tokens: %d in, %d out\n", b, s.ModelCalls, s.InputTokens, s.OutputTokens)
	// Output:
	// completed - Plan written.
	// PLAN.md: "# Plan\n" | model calls: 2 | tokens: 70 in, 15 out
}
