package model_test

import (
	"context"
	"fmt"

	"outerloop/worker/model"
)

// A scripted provider drives an agent loop in tests without a network: it answers with the
// scripted steps in order and records every request.
func ExampleNewScripted() {
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "read_file", `{"path":"go.mod"}`))),
		model.Reply(model.TextResponse("The module is outerloop.")),
	)
	ctx := context.Background()
	history := []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "Which module is this?"}}
	for {
		resp, err := p.Stream(ctx, model.Request{Input: history}, nil)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		history = append(history, resp.Items...)
		for _, call := range resp.ToolCalls() {
			history = append(history, model.Item{Kind: model.KindFunctionCallOutput, CallID: call.CallID, Output: "module outerloop"})
		}
		if resp.EndTurn && len(resp.ToolCalls()) == 0 {
			fmt.Println(resp.Text())
			break
		}
	}
	fmt.Println("requests:", len(p.Requests()))
	// Output:
	// The module is outerloop.
	// requests: 2
}
