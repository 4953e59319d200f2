package worker

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// replyDropper is a TCP proxy in front of a Redis server that, once armed, forwards the next
// request it sees and then drops the connection instead of relaying the reply: Redis ran the
// command, the client never learns it.
type replyDropper struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped chan struct{}
	wg      sync.WaitGroup
}

func newReplyDropper(t *testing.T, target string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target, dropped: make(chan struct{}, 1)}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *replyDropper) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

func (p *replyDropper) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	var dropNext atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if p.armed.CompareAndSwap(true, false) {
					dropNext.Store(true) // before the request leaves: its reply is the next read
				}
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = s.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && dropNext.Load() {
			p.dropped <- struct{}{}
			return // the reply is lost with the connection
		}
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = c.Close()
			}
			return
		}
	}
}

// TestACheckpointWriteWhoseReplyIsLostIsAppliedOnce: Redis runs a checkpoint write and the
// connection drops before its reply arrives; the write is retried (by go-redis and, failing
// that, by the checkpointer) and its history entry is in the history once.
func TestACheckpointWriteWhoseReplyIsLostIsAppliedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := newReplyDropper(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String()})
	t.Cleanup(func() { _ = rdb.Close() })
	store := itemstore.NewStore(rdb, "t:")
	ctx := context.Background()
	fence, err := store.AcquireLease(ctx, "it", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cp := &fencedCheckpointer{store: store, fence: fence, meter: NewMeter(workitems.Budget{}, workitems.Spend{}, nil), obs: nopObserver{}}
	// The first write loads the script, so the armed request is the write itself (EVALSHA).
	if err := cp.Save(ctx, []byte(`{"next":2}`), []byte("step 1")); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	if err := cp.Save(ctx, []byte(`{"next":3}`), []byte("step 2")); err != nil {
		t.Fatalf("the write whose reply was lost: %v", err)
	}
	select {
	case <-proxy.dropped:
	default:
		t.Fatal("the proxy dropped no reply: the test tested nothing")
	}
	state, hist, err := cp.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%q", hist); got != `["step 1" "step 2"]` || string(state) != `{"next":3}` {
		t.Fatalf("after a write whose reply was lost: history %s state %s, want each step once", got, state)
	}
}
