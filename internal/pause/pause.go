// Package pause is the one context-aware wait the packages share.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends and returns ctx.Err(). A d of zero or less
// returns at once (ctx.Err() if ctx has ended).
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
