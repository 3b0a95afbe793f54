//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// TestForeignBelowSlotSurvivesEveryPolicy: on real OpenZFS, a dataset and
// a snapshot someone makes by hand below a slot survive a release by every
// policy (destroy, rollback, snapshot) and the pruning of retained data,
// by the plugin and by gc. Each release stops before it changes anything:
// the slot keeps its holder's data and is reported unhealthy naming what is
// foreign; once that is gone, the release goes on by itself.
func TestForeignBelowSlotSurvivesEveryPolicy(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2eforeign", false)
	// retain: the retained data must outlast the steps up to the hand-made
	// child's creation below it, which a slow guest stretches (see paced).
	a := startAgentScan(t, p, releaseScan, fmt.Sprintf(`class "gone" {
  slots = 1
  release { policy = "destroy" }
}
class "back" {
  slots = 1
  release { policy = "rollback" }
}
class "kept" {
  slots = 1
  release {
    policy = "snapshot"
    retain = %q
  }
}`, paced(60*time.Second)))
	classes := []string{"gone", "back", "kept"}
	for _, c := range classes {
		a.WaitForNodeDevice(t, "zfs", "dataset", c, 1, deviceTimeout)
	}

	type holder struct {
		class, ds string
		gen       int
		alloc     *api.Allocation
	}
	var hs []holder
	for _, c := range classes {
		ds := p.Parent + "/" + c + "/" + c + "-1"
		h := holder{class: c, ds: ds, gen: generation(mustLookup(t, ds))}
		h.alloc, _ = startHeld(t, a, batchJob("foreign-"+c, "raw_exec", c,
			held(`echo holder-data > "$ZFS_`+strings.ToUpper(c)+`_HOST_PATH/data.txt"`), noRetry))
		waitHolder(t, ds, h.alloc.ID)
		run(t, "zfs", "create", ds+"/handmade")
		run(t, "zfs", "snapshot", ds+"@handmade")
		hs = append(hs, h)
	}
	for _, h := range hs {
		finish(t, a, h.alloc.ID)
	}
	for _, h := range hs {
		waitComplete(t, a, h.alloc.JobID)
		a.WaitForUnhealthy(t, "zfs", "dataset", h.class, "is not nomad-device-zfs's", deviceTimeout)
		d := mustLookup(t, h.ds)
		if generation(d) != h.gen || d.User.Get(propHolder) != h.alloc.ID {
			t.Errorf("%s: %s; want its holder's slot untouched", h.ds, describeSlot(d))
		}
		if got := readFile(t, "/"+h.ds+"/data.txt"); got != "holder-data\n" {
			t.Errorf("%s: holder's data %q, want it kept while the release is refused", h.ds, got)
		}
		for _, name := range []string{h.ds + "/handmade", h.ds + "@handmade"} {
			if !existsAny(t, name) {
				t.Errorf("%s was destroyed by a %s release", name, h.class)
			}
		}
	}

	// The operator moves the strangers away; every release goes on.
	for _, h := range hs {
		runUnbusy(t, "zfs", "rename", h.ds+"/handmade", p.Parent+"/handmade-"+h.class)
		runUnbusy(t, "zfs", "destroy", h.ds+"@handmade")
	}
	for _, h := range hs {
		waitReleased(t, h.ds, h.gen)
		if !existsAny(t, p.Parent+"/handmade-"+h.class) {
			t.Errorf("the moved dataset %s/handmade-%s is gone", p.Parent, h.class)
		}
	}

	// Retained data with a hand-made child is kept past its retention: the
	// plugin's own pruning and gc both leave it.
	kept := p.Parent + "/kept/retained-" + hs[2].alloc.ID
	run(t, "zfs", "create", kept+"/handmade")
	expires := time.Unix(int64(mustLookupProp(t, kept, propExpires)), 0)
	// Two of the plugin's passes past the expiry, each of which tried to
	// prune it and was refused: seen in the log, not guessed from a clock
	// (a slow guest's passes come later).
	waitFor(t, time.Until(expires)+releaseTimeout, "two refused prunes of "+kept, func() (bool, string) {
		n := countLines(a.Logs(), "cannot prune retained data", "dataset="+kept)
		return n >= 2, fmt.Sprintf("%d so far", n)
	})
	if time.Now().Before(expires) {
		t.Errorf("the plugin tried to prune %s before its expiry %s", kept, expires)
	}
	if !existsAny(t, kept) || !existsAny(t, kept+"/handmade") {
		t.Fatalf("the plugin pruned retained data with a hand-made child below it")
	}
	cmd := exec.Command(ctlBin, "gc", "-config", a.ConfigFile())
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), kept+": not destroyed") {
		t.Errorf("gc exit %d (%v), want 1 and a line saying why %s is kept:\n%s", code, err, kept, out)
	}
	if !existsAny(t, kept+"/handmade") {
		t.Fatalf("gc destroyed %s/handmade", kept)
	}
	runUnbusy(t, "zfs", "destroy", kept+"/handmade")
	waitFor(t, releaseTimeout, kept+" pruned once the child is gone", func() (bool, string) {
		return !existsAny(t, kept), "still there"
	})
}

// existsAny reports whether a dataset or snapshot exists.
func existsAny(t testing.TB, name string) bool {
	t.Helper()
	_, err := runErr("zfs", "list", "-H", "-o", "name", "-t", "all", name)
	return err == nil
}

// mustLookupProp reads a numeric user property of a dataset.
func mustLookupProp(t testing.TB, name, prop string) int {
	t.Helper()
	v := strings.TrimSpace(run(t, "zfs", "get", "-H", "-p", "-o", "value", prop, name))
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s of %s: %q is not a number", prop, name, v)
	}
	return n
}
