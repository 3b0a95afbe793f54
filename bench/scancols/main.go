// Command scancols times the plugin's scan of a tree against bare listings
// of the same tree, column by column: where a `zfs list` spends beyond the
// names (docs/performance.md, "Where the rest of the scan's cost goes").
// It runs inside the e2e VM (bench/scan-columns.sh), on a pool of its own:
// it creates SLOTS datasets marked as the plugin marks its slots, times
// every listing ROUNDS times in turn, then gives each slot a @pristine
// snapshot and times them again.
//
// usage: scancols POOL SLOTS ROUNDS
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: scancols POOL SLOTS ROUNDS")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[2])
	rounds, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || n < 1 || rounds < 1 {
		fmt.Fprintf(os.Stderr, "scancols: SLOTS %q and ROUNDS %q must be positive numbers\n", os.Args[2], os.Args[3])
		os.Exit(2)
	}
	if err := run(os.Args[1], n, rounds); err != nil {
		fmt.Fprintln(os.Stderr, "scancols:", err)
		os.Exit(1)
	}
}

func run(pool string, n, rounds int) error {
	cfg := &model.Config{Parent: pool + "/nomad", Classes: []model.Class{{Name: "s", Slots: n}}}
	class := cfg.ClassDataset("s")
	if err := zfsRun("create", "-p", class); err != nil {
		return err
	}
	// Four creates at a time, as the plugin creates slots.
	g := errgroup.Group{}
	g.SetLimit(4)
	for i := 1; i <= n; i++ {
		ds := cfg.SlotDataset("s", fmt.Sprintf("s-%d", i))
		g.Go(func() error {
			args, err := zfs.CreateArgs(ds, model.NewSlotProps(cfg.Classes[0], ds, 1, 0, time.Now()))
			if err != nil {
				return err
			}
			return zfsRun(args...)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	scan, err := zfs.ListArgs(cfg.Parent, model.UserProps)
	if err != nil {
		return err
	}
	cols := strings.Split(scan[slices.Index(scan, "-o")+1], ",")
	listings := [][2]string{{"bare -o name", "list -H -p -r -o name"}}
	for _, c := range cols[1:] {
		listings = append(listings, [2]string{"-o name," + c, "list -H -p -r -t filesystem -o name," + c})
	}
	listings = append(listings,
		[2]string{"-t filesystem, the scan's columns", "list -H -p -r -t filesystem -o " + strings.Join(cols, ",")},
		[2]string{"the scan's types, -o name", "list -H -p -r -t filesystem,snapshot -o name"},
		[2]string{"the plugin's scan", strings.Join(scan[:len(scan)-1], " ")})
	fmt.Printf("scancols slots=%d rounds=%d snapshots=0\n", n, rounds)
	if err := timeAll(cfg.Parent, listings, rounds); err != nil {
		return err
	}
	var snaps []string
	for i := 1; i <= n; i++ {
		snaps = append(snaps, cfg.SlotDataset("s", fmt.Sprintf("s-%d", i))+"@"+model.PristineSnapshot)
	}
	if err := zfsRun(append([]string{"snapshot"}, snaps...)...); err != nil {
		return err
	}
	fmt.Printf("scancols slots=%d rounds=%d snapshots=%d\n", n, rounds, n)
	return timeAll(cfg.Parent, listings, rounds)
}

// timeAll runs every listing of root rounds times, in turn, and prints
// each one's median and its ratio to the first's.
func timeAll(root string, listings [][2]string, rounds int) error {
	times := make([][]time.Duration, len(listings))
	for r := 0; r < rounds; r++ {
		for i, l := range listings {
			start := time.Now()
			if err := zfsRun(append(strings.Fields(l[1]), root)...); err != nil {
				return err
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	base := median(times[0])
	for i, l := range listings {
		m := median(times[i])
		fmt.Printf("scancols %-40s median_ms=%6.0f ratio=%.2f\n", l[0], float64(m)/1e6, float64(m)/float64(base))
	}
	return nil
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

func zfsRun(args ...string) error {
	cmd := exec.CommandContext(context.Background(), "zfs", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("zfs %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
