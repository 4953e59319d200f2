package agentloop

import (
	"errors"
	"fmt"
	"testing"
)

func TestTransition(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Phase]bool{
		{Preparing, Sampling}:    true,
		{Sampling, JoiningTools}: true,
		{JoiningTools, Deciding}: true,
		{Deciding, Preparing}:    true,
		{Deciding, Compacting}:   true,
		{Deciding, StopGate}:     true,
		{Compacting, Preparing}:  true,
		{StopGate, Preparing}:    true,
		{StopGate, Completed}:    true,
	}
	for _, from := range AllPhases() {
		if !from.Terminal() {
			allowed[[2]Phase{from, Aborted}] = true
			allowed[[2]Phase{from, ErrorClosing}] = true
		}
	}
	for _, from := range AllPhases() {
		for _, to := range AllPhases() {
			want := allowed[[2]Phase{from, to}]
			name := fmt.Sprintf("%s to %s is forbidden", from, to)
			if want {
				name = fmt.Sprintf("%s to %s is allowed", from, to)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				err := Transition(from, to)
				if want && err != nil {
					t.Fatalf("Transition(%s, %s) = %v, want nil", from, to, err)
				}
				if !want && !errors.Is(err, ErrBadTransition) {
					t.Fatalf("Transition(%s, %s) = %v, want ErrBadTransition", from, to, err)
				}
			})
		}
	}
	t.Run("an unknown phase is refused", func(t *testing.T) {
		t.Parallel()
		if err := Transition("warp", Sampling); !errors.Is(err, ErrBadTransition) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("compaction is never a terminal and completion only follows the stop gate", func(t *testing.T) {
		t.Parallel()
		for _, from := range AllPhases() {
			if from != StopGate && Transition(from, Completed) == nil {
				t.Errorf("%s may complete without the stop gate", from)
			}
		}
		if Compacting.Terminal() {
			t.Error("Compacting is terminal")
		}
	})
}
