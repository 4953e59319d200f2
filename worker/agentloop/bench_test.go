package agentloop

import (
	"context"
	"testing"

	"outerloop/worker"
	"outerloop/worker/model"
)

// discardCheckpointer accepts every save and keeps only the last state (constant memory).
type discardCheckpointer struct{ state []byte }

func (d *discardCheckpointer) Load(context.Context) ([]byte, [][]byte, error) { return nil, nil, nil }
func (d *discardCheckpointer) Save(_ context.Context, st []byte, _ ...[]byte) error {
	d.state = st
	return nil
}

// benchStep measures one loop step: a phase transition plus its checkpoint write (state and
// one appended history entry) through cp. A real-Redis checkpointer can be passed the same way.
func benchStep(b *testing.B, cp worker.Checkpointer) {
	h := newHarness(b)
	a := h.attempt()
	a.Checkpoints = cp
	rt, err := New(WithProvider(model.NewScripted("bench"))).newRuntime(b.Context(), a)
	if err != nil {
		b.Fatal(err)
	}
	rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: "goal"})
	rt.st.GoalLen = 1
	entry := model.Item{Kind: model.KindFunctionCallOutput, CallID: "c1", Output: "a typical short tool observation"}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		rt.st.Phase = Deciding
		rt.append(entry)
		if err := rt.enter(ctx, Preparing); err != nil {
			b.Fatal(err)
		}
		rt.history = rt.history[:1] // keep memory flat; the checkpointer saw the append
	}
}

func BenchmarkStep(b *testing.B) { benchStep(b, &discardCheckpointer{}) }
