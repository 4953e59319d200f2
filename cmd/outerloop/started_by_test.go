package main

import (
	"testing"

	"outerloop/workitems"
)

func TestItemsSaysWhatStartedAnItem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    workitems.Origin
		want string
	}{
		{workitems.Origin{Kind: workitems.OriginManual, Actor: "alice"}, "manual (alice)"},
		{workitems.Origin{Kind: workitems.OriginAPI, Actor: "api", Caller: &workitems.CallerOrigin{Auth: workitems.CallerHMAC,
			IdempotencyKey: "ci-run-42", Fields: []string{"job", "title"}}},
			`api (api), authenticated by hmac, idempotency key "ci-run-42", fields job, title`},
	} {
		if got := startedBy(tc.o); got != tc.want {
			t.Errorf("startedBy(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}
