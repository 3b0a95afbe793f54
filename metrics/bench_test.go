package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// staticViews publishes one view.
type staticViews struct{ v *model.View }

func (s staticViews) View() (*model.View, <-chan struct{}) { return s.v, nil }

// heldView is n slots in classes of 1000, every one held by an allocation
// the snapshot lists, as on a busy node.
func heldView(n int) (*model.View, *model.Snapshot) {
	v := &model.View{ScannedAt: time.Now(), Pool: &zfs.Pool{Name: "tank", Health: zfs.PoolOnline, Size: 1 << 40, Free: 1 << 39}}
	snap := &model.Snapshot{}
	for c := 0; n > 0; c++ {
		k := min(n, 1000)
		n -= k
		name := fmt.Sprintf("c%d", c)
		cv := model.ClassView{Class: model.Class{Name: name, Slots: k}, Dataset: "tank/nomad/" + name, Exists: true}
		for i := 1; i <= k; i++ {
			id := fmt.Sprintf("%s-%d", name, i)
			alloc := fmt.Sprintf("%08x-0000-4000-8000-%012x", c, i)
			cv.Slots = append(cv.Slots, model.Slot{ID: id, Class: name, Dataset: cv.Dataset + "/" + id, Exists: true, Healthy: true,
				State: model.StateHeld, Holder: alloc, Info: model.Info{Used: 1 << 20, Referenced: 1 << 20, Quota: 1 << 30}})
			snap.Allocs = append(snap.Allocs, model.Alloc{ID: alloc, Namespace: "default", JobID: "job-" + name, TaskGroup: "g"})
		}
		v.Classes = append(v.Classes, cv)
	}
	return v, snap
}

// BenchmarkScrape is one scrape of the endpoint, served over HTTP and read
// whole, at 10,000 held slots: 40,000 series with Nomad's labels.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			v, snap := heldView(n)
			m := New(&model.Config{Parent: "tank/nomad"}, "bench")
			m.Watch(staticViews{v}, func() *model.Snapshot { return snap })
			srv := httptest.NewServer(m.Handler(hclog.NewNullLogger()))
			defer srv.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				b.SetBytes(n)
			}
		})
	}
}
