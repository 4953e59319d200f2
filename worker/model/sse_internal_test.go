package model

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   []sseEvent
	}{
		{name: "reads event and data fields", stream: "event: a\ndata: {\"x\":1}\n\n",
			want: []sseEvent{{Event: "a", Data: []byte(`{"x":1}`)}}},
		{name: "joins multi-line data with newlines", stream: "data: one\ndata: two\n\n",
			want: []sseEvent{{Data: []byte("one\ntwo")}}},
		{name: "skips comments and unknown fields", stream: ": ping\nid: 7\nretry: 100\ndata: x\n\n",
			want: []sseEvent{{Data: []byte("x")}}},
		{name: "accepts CRLF line ends and no space after the colon", stream: "event:e\r\ndata:x\r\n\r\n",
			want: []sseEvent{{Event: "e", Data: []byte("x")}}},
		{name: "skips extra blank lines", stream: "\n\n\ndata: x\n\n\n",
			want: []sseEvent{{Data: []byte("x")}}},
		{name: "drops an event cut by the end of the stream", stream: "data: a\n\ndata: b",
			want: []sseEvent{{Data: []byte("a")}}},
		{name: "reads a line longer than the buffer", stream: "data: " + strings.Repeat("y", 200<<10) + "\n\n",
			want: []sseEvent{{Data: []byte(strings.Repeat("y", 200<<10))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSSEReader(strings.NewReader(tt.stream))
			var got []sseEvent
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i].Event != tt.want[i].Event || string(got[i].Data) != string(tt.want[i].Data) {
					t.Errorf("event %d = %q/%.40q, want %q/%.40q", i, got[i].Event, got[i].Data, tt.want[i].Event, tt.want[i].Data)
				}
			}
		})
	}
}
