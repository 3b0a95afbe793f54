package model

import (
	"slices"
	"testing"
	"time"
)

// TestReceivePropsAreTheReceivers: what a copy arriving from a peer is
// received with is this node's decision: its class's properties (but those
// only a create sets), the plugin's mark and state; every other property
// of the plugin's, and readonly, never comes from the stream.
func TestReceivePropsAreTheReceivers(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name       string
		class      map[string]string
		want       map[string]string // a subset of ReceiveProps
		notSet     []string          // not in ReceiveProps
		excluded   []string          // in ReceiveExclude
		notExclude []string          // not in ReceiveExclude
	}{
		{name: "no class properties",
			want:     map[string]string{PropOwner: "tank/nomad/pg/parked-A-pg-1", PropState: string(StateReceiving), PropHolder: "A"},
			notSet:   []string{"quota", PropGeneration, PropRetainAs},
			excluded: []string{PropGeneration, PropRetainAs, PropHolderIndex, "readonly"}, notExclude: []string{PropOwner, PropState}},
		{name: "the class's limits", class: map[string]string{"quota": "100M", "refquota": "50M", "compression": "lz4"},
			want:     map[string]string{"quota": "100M", "refquota": "50M", "compression": "lz4"},
			excluded: []string{"readonly"}, notExclude: []string{"quota", "refquota", PropExpires}},
		{name: "create-only properties stay the stream's", class: map[string]string{"casesensitivity": "insensitive", "quota": "1G"},
			want: map[string]string{"quota": "1G"}, notSet: []string{"casesensitivity"}},
		{name: "a class that sets readonly", class: map[string]string{"readonly": "on"},
			want: map[string]string{"readonly": "on"}, notExclude: []string{"readonly"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ReceiveProps(Class{Name: "pg", Properties: tc.class}, "tank/nomad/pg/parked-A-pg-1", "A", now, now.Add(time.Hour))
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tc.notSet {
				if _, ok := got[k]; ok {
					t.Errorf("%s set to %q", k, got[k])
				}
			}
			ex := ReceiveExclude(got)
			for _, k := range tc.excluded {
				if !slices.Contains(ex, k) {
					t.Errorf("%s is taken from the stream (exclude %v)", k, ex)
				}
			}
			for _, k := range append(tc.notExclude, keys(got)...) {
				if slices.Contains(ex, k) {
					t.Errorf("%s both set and excluded", k)
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
