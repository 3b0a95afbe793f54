package plugin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// BenchmarkReleaseDelay measures, on a real Nomad agent (fake zfs below the
// seam), the delay from an allocation turning client-terminal — the moment
// the server counts its device free — to its slot being ready again:
//
//	go test -run '^$' -bench ReleaseDelay -benchtime 10x ./plugin/
//
// The server's ModifyTime of the terminal allocation starts the clock; the
// slot's recorded state change stops it (scan_interval is 2s; the watcher
// wakes the reconcile at once, so the delay is not bound to it).
func BenchmarkReleaseDelay(b *testing.B) {
	a := startLifecycleAgent(b, 1, `policy = "destroy"`)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		gen := a.slotProp(b, "scratch-1", "generation")
		j := a.RunJob(b, job(fmt.Sprintf("bench-%d", i), "true"))
		stubs := a.WaitAllocs(b, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
		alloc, _, err := a.Client().Allocations().Info(stubs[0].ID, nil)
		if err != nil {
			b.Fatal(err)
		}
		ended := time.Unix(0, alloc.ModifyTime)
		for a.slotProp(b, "scratch-1", "generation") == gen || a.slotProp(b, "scratch-1", "state") != "ready" {
			if time.Since(ended) > time.Minute {
				b.Fatal("slot not released within a minute")
			}
			time.Sleep(20 * time.Millisecond)
		}
		total += time.Since(ended)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-ready/op")
}
