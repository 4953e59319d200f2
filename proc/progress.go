package proc

import "time"

// DefaultProgressEvery is how often a running command's Progress is called when Spec sets no
// interval: often enough that a person watching an item sees a long command move.
const DefaultProgressEvery = 5 * time.Second

// Progress receives a running command's elapsed time and the bounded tail of its output so
// far (Spec.TailMax bytes), every Spec.ProgressEvery until it ends. It runs on its own
// goroutine and must not block for long.
type Progress func(elapsed time.Duration, tail string)

// watchProgress calls s.Progress on real time (processes run in real time) until the returned
// stop is called; stop waits for a call in flight, so nothing is reported after the command's
// result.
func watchProgress(s Spec, p *Process, start time.Time) (stop func()) {
	if s.Progress == nil {
		return func() {}
	}
	every := s.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.Progress(realTime.Now().Sub(start), p.tail.String())
			}
		}
	}()
	return func() { close(done); <-finished }
}
