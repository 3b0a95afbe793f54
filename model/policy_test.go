package model

import "testing"

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
		{name: "rollback", class: Class{Release: Release{Policy: PolicyRollback}}, slot: ready, want: true},
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
