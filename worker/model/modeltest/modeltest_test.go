package modeltest_test

import (
	"context"
	"errors"
	"testing"

	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
)

func TestServerRejectsAWrongKey(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Text("never served"))
	p, err := model.New(srv.Config(), "wrong", func(string) string { return "sk-wrong" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Stream(context.Background(), model.Request{Input: []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "hi"}}}, nil)
	var me *model.Error
	if !errors.As(err, &me) || me.Class != workitems.ClassPermission || me.StatusCode != 401 {
		t.Fatalf("err = %v, want a 401 permission error", err)
	}
	if srv.Pending() != 1 {
		t.Errorf("pending = %d, want the reply still queued", srv.Pending())
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Authorized || reqs[0].Header.Get("Authorization") != "[redacted]" {
		t.Errorf("requests = %+v, want one unauthorized request with the header redacted", reqs)
	}
}

func TestServerServesRepliesInOrder(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.ServerError(), modeltest.ToolCalls(model.Call("c1", "shell", `{"cmd":"go test ./..."}`)), modeltest.Text("ok"))
	p := srv.Provider(t)
	ctx := context.Background()
	req := model.Request{Input: []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "go"}}}
	if _, err := p.Stream(ctx, req, nil); !model.Retryable(err) {
		t.Fatalf("reply 1: err = %v, want a retryable error", err)
	}
	r, err := p.Stream(ctx, req, nil)
	if err != nil || len(r.ToolCalls()) != 1 || r.ToolCalls()[0].CallID != "c1" {
		t.Fatalf("reply 2 = %+v, %v; want call c1", r, err)
	}
	r, err = p.Stream(ctx, req, nil)
	if err != nil || r.Text() != "ok" {
		t.Fatalf("reply 3 = %+v, %v; want text ok", r, err)
	}
	if n := len(srv.Requests()); n != 3 || srv.Pending() != 0 {
		t.Errorf("requests %d pending %d, want 3 and 0", n, srv.Pending())
	}
}
