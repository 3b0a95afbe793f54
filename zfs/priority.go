package zfs

import "context"

type backgroundKey struct{}

// Background marks the commands run under ctx as background work that
// nothing waits for: the periodic scan. A Runner may run them at the
// lowest CPU priority (zfsexec.Runner does), so that on a busy host the
// commands a release or a task start waits for win the CPU over a listing
// of thousands of datasets.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx was marked by Background.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

// Foreground undoes Background for the commands run under the returned
// context: they run at the normal priority again.
func Foreground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, false)
}
