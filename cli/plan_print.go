package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// print writes the report for a person: per group its placements, or
// Nomad's reasons and each candidate node's slots.
func (r *planReport) print(w io.Writer) {
	fmt.Fprintf(w, "Job %q (namespace %s), planned against the cluster at %s\n", r.Job, r.Namespace, r.NomadAPI)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "! %s\n", n)
	}
	missing := 0
	for _, g := range r.Groups {
		fmt.Fprintf(w, "\nGroup %q: %d to place", g.Name, len(g.Placed)+g.Missing)
		if g.Running > 0 {
			fmt.Fprintf(w, ", %d running kept", g.Running)
		}
		fmt.Fprintln(w)
		for _, p := range g.Placed {
			fmt.Fprintf(w, "  ✓ %s on node %s (%s)%s\n", p.Name, p.NodeName, short(p.NodeID), devicesText(p.Devices))
			for _, h := range p.Handovers {
				fmt.Fprintf(w, "      slot %s\n", h)
			}
		}
		if g.Missing == 0 {
			continue
		}
		missing += g.Missing
		fmt.Fprintf(w, "  ✗ %d allocation(s) cannot be placed. Nomad:\n", g.Missing)
		for _, reason := range g.Reasons {
			fmt.Fprintf(w, "      %s\n", reason)
		}
		for _, n := range g.Nodes {
			if n.Excluded != "" {
				fmt.Fprintf(w, "    node %s (%s): not considered: %s\n", n.NodeName, short(n.NodeID), n.Excluded)
				continue
			}
			for _, a := range n.Asks {
				fmt.Fprintf(w, "    node %s (%s), task %s asks %d × %s: %d free\n", n.NodeName, short(n.NodeID), a.Task, a.Count, a.Device, a.Free)
				for _, u := range a.Unmet {
					fmt.Fprintf(w, "      constraint not met: %s\n", u)
				}
				for _, s := range a.Slots {
					fmt.Fprintf(w, "      %-8s %s\n", s.ID, s.Reason)
				}
			}
		}
	}
	if len(r.Stopped) > 0 {
		fmt.Fprintf(w, "\nThe plan stops %d allocation(s): %s\n", len(r.Stopped), shortList(r.Stopped))
	}
	if len(r.Preempted) > 0 {
		fmt.Fprintf(w, "\nThe plan preempts %d allocation(s): %s\n", len(r.Preempted), shortList(r.Preempted))
	}
	if missing > 0 {
		fmt.Fprintf(w, "\n✗ %d allocation(s) of job %s cannot be placed now.\n", missing, r.Job)
		return
	}
	fmt.Fprintf(w, "\n✓ every allocation of job %s can be placed now.\n", r.Job)
}

func devicesText(devs map[string][]string) string {
	tasks := make([]string, 0, len(devs))
	for t := range devs {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	var parts []string
	for _, t := range tasks {
		parts = append(parts, fmt.Sprintf("task %s: slot %s", t, strings.Join(devs[t], ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

func shortList(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
