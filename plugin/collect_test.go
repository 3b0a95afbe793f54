package plugin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// views publishes views as hooks.Manager does.
type views struct {
	mu      sync.Mutex
	v       *model.View
	updated chan struct{}
}

func (p *views) View() (*model.View, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v, p.updated
}

func (p *views) publish(v *model.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v = v
	close(p.updated)
	p.updated = make(chan struct{})
}

// TestCollectAfterScans: one collection after each new scan's view, none
// for a view republished over the same scan (a release's re-read slot).
func TestCollectAfterScans(t *testing.T) {
	src := &views{updated: make(chan struct{})}
	collected := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		collectAfterScans(ctx, src, 10*time.Millisecond, func() { collected <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()

	// A collection is awaited for long (a loaded machine); its absence
	// for a while longer than the 10 ms it takes.
	expect := func(what string, want bool) {
		t.Helper()
		wait := 200 * time.Millisecond
		if want {
			wait = 10 * time.Second
		}
		select {
		case <-collected:
			if !want {
				t.Fatalf("%s: collected", what)
			}
		case <-time.After(wait):
			if want {
				t.Fatalf("%s: not collected", what)
			}
		}
	}
	expect("before any view", false)
	scan := time.Unix(1000, 0)
	src.publish(&model.View{ScannedAt: scan})
	expect("the first scan", true)
	src.publish(&model.View{ScannedAt: scan})
	expect("a re-read slot over the same scan", false)
	src.publish(&model.View{ScannedAt: scan.Add(15 * time.Second)})
	expect("the next scan", true)
	expect("nothing new", false)
}
