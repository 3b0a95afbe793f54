package model

import (
	"slices"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func TestMarksRelease(t *testing.T) {
	ready := Slot{HasPristine: true}
	cases := []struct {
		name  string
		class Class
		slot  Slot
		want  bool
	}{
		{name: "destroy for every outcome", class: Class{}, slot: ready, want: false},
		{name: "destroy, written out", class: Class{Release: Release{Policy: PolicyDestroy}}, slot: ready, want: false},
		{name: "rollback removes the data first", class: Class{Release: Release{Policy: PolicyRollback}}, slot: ready, want: false},
		{name: "rollback, destroy on failure", class: Class{Release: Release{Policy: PolicyRollback, OnFailure: PolicyDestroy}}, slot: ready, want: false},
		{name: "rollback, keep on failure", class: Class{Release: Release{Policy: PolicyRollback, OnFailure: PolicySnapshot}}, slot: ready, want: true},
		{name: "rollback without its pristine snapshot destroys", class: Class{Release: Release{Policy: PolicyRollback}}, slot: Slot{}, want: false},
		{name: "snapshot", class: Class{Release: Release{Policy: PolicySnapshot}}, slot: ready, want: true},
		{name: "on_failure keeps data", class: Class{Release: Release{Policy: PolicyDestroy, OnFailure: PolicySnapshot}}, slot: ready, want: true},
		{name: "sticky parks by outcome", class: Class{Sticky: true}, slot: ready, want: true},
		{name: "orphan of a rollback class destroys", class: Class{Release: Release{Policy: PolicyRollback}}, slot: Slot{Orphan: true, HasPristine: true}, want: false},
		{name: "orphan of a snapshot class keeps data", class: Class{Release: Release{Policy: PolicySnapshot}}, slot: Slot{Orphan: true}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.class.MarksRelease(tc.slot); got != tc.want {
				t.Fatalf("MarksRelease = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClearedOnReady(t *testing.T) {
	carrying := func(props map[string]string) Slot {
		return Slot{Info: InfoOf(&zfs.Dataset{Name: "tank/nomad/scratch/scratch-1", User: zfs.UserPropsOf(props)})}
	}
	cases := []struct {
		name   string
		slot   Slot
		marked bool
		want   []string
	}{
		{name: "held, unmarked release", slot: carrying(map[string]string{PropState: "held", PropHolder: "a"}), want: []string{PropHolder}},
		{name: "held, this release marked it", slot: carrying(map[string]string{PropState: "held", PropHolder: "a"}), marked: true, want: []string{PropHolder, PropOutcome}},
		{name: "marked by an earlier pass", slot: carrying(map[string]string{PropState: "releasing", PropHolder: "a", PropOutcome: "failed"}), marked: true, want: []string{PropHolder, PropOutcome}},
		{name: "ready with an unrecorded holder's data", slot: carrying(map[string]string{PropState: "ready"}), want: nil},
		{name: "an interrupted retain's leftovers", slot: carrying(map[string]string{PropState: "releasing", PropHolder: "a", PropOutcome: "failed", PropRetainAs: "x", PropExpires: "1"}), marked: true,
			want: []string{PropHolder, PropOutcome, PropRetainAs, PropExpires}},
		{name: "claimed parked data still carrying its outcome", slot: carrying(map[string]string{PropState: "held", PropHolder: "b", PropOutcome: "lost"}), want: []string{PropHolder, PropOutcome}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClearedOnReady(tc.slot, tc.marked); !slices.Equal(got, tc.want) {
				t.Fatalf("ClearedOnReady = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestKeepsLost: in a class that keeps replicas, a lost holder's data is
// kept aside whatever the policy (Nomad 1.6.2 may have replaced it
// elsewhere without naming it); any other outcome, and a class without
// replicas, follow the policy.
func TestKeepsLost(t *testing.T) {
	replicas := Replicate{Copies: 1, Every: time.Minute}
	held := Slot{ID: "pg-1", HasPristine: true}
	cases := []struct {
		name    string
		class   Class
		slot    Slot
		outcome string
		want    Policy
	}{
		{"replicas, lost, destroy: kept", Class{Replicate: replicas}, held, OutcomeLost, PolicySnapshot},
		{"replicas, lost, rollback: kept", Class{Replicate: replicas, Release: Release{Policy: PolicyRollback}}, held, OutcomeLost, PolicySnapshot},
		{"replicas, lost, on_failure destroy: kept", Class{Replicate: replicas, Release: Release{Policy: PolicySnapshot, OnFailure: PolicyDestroy}},
			held, OutcomeLost, PolicySnapshot},
		{"replicas, failed: the policy", Class{Replicate: replicas}, held, OutcomeFailed, PolicyDestroy},
		{"replicas, complete: the policy", Class{Replicate: replicas, Release: Release{Policy: PolicyRollback}}, held, OutcomeComplete, PolicyRollback},
		{"no replicas, lost: the policy", Class{}, held, OutcomeLost, PolicyDestroy},
		{"replicas, an orphan retired: destroyed", Class{Replicate: replicas}, Slot{ID: "pg-9", Orphan: true}, OutcomeRetired, PolicyDestroy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.class.PolicyFor(tc.slot, tc.outcome); got != tc.want {
				t.Errorf("PolicyFor = %s, want %s", got, tc.want)
			}
		})
	}
}
