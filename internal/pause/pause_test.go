package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{name: "waits and returns nil", ctx: context.Background(), d: time.Millisecond},
		{name: "zero returns at once", ctx: context.Background(), d: 0},
		{name: "an ended context wins over a long wait", ctx: ended, d: time.Hour, want: context.Canceled},
		{name: "an ended context with zero", ctx: ended, d: 0, want: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := For(tc.ctx, tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
