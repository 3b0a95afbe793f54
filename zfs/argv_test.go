package zfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestArgvBuilders(t *testing.T) {
	cases := []struct {
		name string
		args func() ([]string, error)
		want []string
	}{
		{
			name: "list with user properties",
			args: func() ([]string, error) { return ListArgs("tank/nomad", []string{"a:owner", "a:state"}) },
			want: []string{"list", "-H", "-p", "-r", "-t", "filesystem,snapshot,bookmark", "-o",
				"name,type,used,available,referenced,mountpoint,mounted,quota,refquota,reservation,compression,compressratio,recordsize,encryption,origin,guid,a:owner,a:state",
				"tank/nomad"},
		},
		{
			name: "list volumes too, with the resume token",
			args: func() ([]string, error) { return ListAllArgs("tank/nomad/pg/parked-a", []string{"a:owner"}) },
			want: []string{"list", "-H", "-p", "-r", "-t", "filesystem,snapshot,volume", "-o",
				"name,type,used,available,referenced,mountpoint,mounted,quota,refquota,reservation,compression,compressratio,recordsize,encryption,origin,guid,receive_resume_token,a:owner",
				"tank/nomad/pg/parked-a"},
		},
		{
			name: "zpool list one pool",
			args: func() ([]string, error) { return ZpoolListArgs("tank") },
			want: []string{"list", "-H", "-p", "-o", "name,size,allocated,free,health,readonly", "tank"},
		},
		{
			name: "create with properties in sorted order",
			args: func() ([]string, error) {
				return CreateArgs("tank/nomad/scratch/scratch-1", map[string]string{"quota": "1G", "compression": "lz4", "x:y": "z"})
			},
			want: []string{"create", "-o", "compression=lz4", "-o", "quota=1G", "-o", "x:y=z", "tank/nomad/scratch/scratch-1"},
		},
		{
			name: "create without properties",
			args: func() ([]string, error) { return CreateArgs("tank/a", nil) },
			want: []string{"create", "tank/a"},
		},
		{
			name: "clone",
			args: func() ([]string, error) {
				return CloneArgs("tank/golden@seed", "tank/nomad/pg/pg-1", map[string]string{"a:b": "c"})
			},
			want: []string{"clone", "-o", "a:b=c", "tank/golden@seed", "tank/nomad/pg/pg-1"},
		},
		{
			name: "snapshot",
			args: func() ([]string, error) { return SnapshotArgs("tank/a@pristine", nil) },
			want: []string{"snapshot", "tank/a@pristine"},
		},
		{
			name: "destroy plain",
			args: func() ([]string, error) { return DestroyArgs("tank/a", DestroyOptions{}) },
			want: []string{"destroy", "tank/a"},
		},
		{
			name: "destroy recursive forced",
			args: func() ([]string, error) { return DestroyArgs("tank/a", DestroyOptions{Recursive: true, Force: true}) },
			want: []string{"destroy", "-r", "-f", "tank/a"},
		},
		{
			name: "destroy snapshot",
			args: func() ([]string, error) { return DestroyArgs("tank/a@s", DestroyOptions{}) },
			want: []string{"destroy", "tank/a@s"},
		},
		{
			name: "destroy several snapshots of one filesystem",
			args: func() ([]string, error) { return DestroyArgs("tank/a@migrate-1,migrate-final", DestroyOptions{}) },
			want: []string{"destroy", "tank/a@migrate-1,migrate-final"},
		},
		{
			name: "rollback destroying newer",
			args: func() ([]string, error) { return RollbackArgs("tank/a@s", true) },
			want: []string{"rollback", "-r", "tank/a@s"},
		},
		{
			name: "set several",
			args: func() ([]string, error) { return SetArgs("tank/a", map[string]string{"b:s": "held", "a:h": "x"}) },
			want: []string{"set", "a:h=x", "b:s=held", "tank/a"},
		},
		{
			name: "inherit",
			args: func() ([]string, error) { return InheritArgs("tank/a", "a:holder") },
			want: []string{"inherit", "a:holder", "tank/a"},
		},
		{
			name: "rename",
			args: func() ([]string, error) { return RenameArgs("tank/a", "tank/b") },
			want: []string{"rename", "tank/a", "tank/b"},
		},
		{
			name: "rename a snapshot",
			args: func() ([]string, error) { return RenameArgs("tank/a@s", "tank/a@t") },
			want: []string{"rename", "tank/a@s", "tank/a@t"},
		},
		{
			name: "hold",
			args: func() ([]string, error) { return HoldArgs("nomad-device-zfs", "tank/a@s") },
			want: []string{"hold", "nomad-device-zfs", "tank/a@s"},
		},
		{
			name: "release",
			args: func() ([]string, error) { return ReleaseArgs("nomad-device-zfs", "tank/a@s") },
			want: []string{"release", "nomad-device-zfs", "tank/a@s"},
		},
		{
			name: "release several",
			args: func() ([]string, error) { return ReleaseArgs("nomad-device-zfs", "tank/a@migrate-1,migrate-final") },
			want: []string{"release", "nomad-device-zfs", "tank/a@migrate-1", "tank/a@migrate-final"},
		},
		{
			name: "holds",
			args: func() ([]string, error) { return HoldsArgs("tank/a@s") },
			want: []string{"holds", "-H", "tank/a@s"},
		},
		{
			name: "mount",
			args: func() ([]string, error) { return MountArgs("tank/a") },
			want: []string{"mount", "tank/a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.args()
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestArgvBuildersRefuseFlagLikeNames checks that nothing a caller passes can
// reach zfs as an option: every operand is validated before a process runs.
func TestArgvBuildersRefuseFlagLikeNames(t *testing.T) {
	cases := []struct {
		name    string
		args    func() ([]string, error)
		wantErr string
	}{
		{"dataset starting with dash", func() ([]string, error) { return CreateArgs("-o", nil) }, `"-o"`},
		{"later component starting with dash", func() ([]string, error) { return CreateArgs("tank/-R", nil) }, `"-R"`},
		{"space in name", func() ([]string, error) { return CreateArgs("tank/bad name", nil) }, `contains " "`},
		{"comma in name", func() ([]string, error) { return CreateArgs("tank/a,b", nil) }, `contains ","`},
		{"empty component", func() ([]string, error) { return DestroyArgs("tank//a", DestroyOptions{}) }, "empty name component"},
		{"pool starting with digit", func() ([]string, error) { return CreateArgs("1tank/a", nil) }, "must start with a letter"},
		{"snapshot where dataset wanted", func() ([]string, error) { return CreateArgs("tank/a@s", nil) }, "is a snapshot name"},
		{"dataset where snapshot wanted", func() ([]string, error) { return RollbackArgs("tank/a", false) }, "not a snapshot name"},
		{"snapshot part starting with dash", func() ([]string, error) { return SnapshotArgs("tank/a@-r", nil) }, `"-r"`},
		{"property name starting with dash", func() ([]string, error) { return CreateArgs("tank/a", map[string]string{"-o": "x"}) }, "must start with a letter"},
		{"property value with newline", func() ([]string, error) { return SetArgs("tank/a", map[string]string{"a:b": "x\ny"}) }, "tab or newline"},
		{"list user property without colon", func() ([]string, error) { return ListArgs("tank", []string{"owner"}) }, "must contain ':'"},
		{"hold tag starting with dash", func() ([]string, error) { return HoldArgs("-r", "tank/a@s") }, `"-r"`},
		{"pool list with dataset", func() ([]string, error) { return ZpoolListArgs("tank/a") }, "invalid pool name"},
		{"set without properties", func() ([]string, error) { return SetArgs("tank/a", nil) }, "no properties"},
		{"name too long", func() ([]string, error) { return CreateArgs("tank/"+strings.Repeat("a", 300), nil) }, "longer than"},
		{"snapshot renamed to another filesystem", func() ([]string, error) { return RenameArgs("tank/a@s", "tank/b@s") }, "keeps its filesystem"},
		{"snapshot list with an empty name", func() ([]string, error) { return DestroyArgs("tank/a@x,,y", DestroyOptions{}) }, "empty name component"},
		{"snapshot list with a dash name", func() ([]string, error) { return DestroyArgs("tank/a@x,-r", DestroyOptions{}) }, `"-r"`},
		{"release of a dataset", func() ([]string, error) { return ReleaseArgs("t", "tank/a") }, "not a snapshot name"},
		{"release list with a dash name", func() ([]string, error) { return ReleaseArgs("t", "tank/a@x,-r") }, `"-r"`},
		{"snapshot renamed to a filesystem", func() ([]string, error) { return RenameArgs("tank/a@s", "tank/b") }, "not a snapshot name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.args()
			if err == nil {
				t.Fatalf("no error; argv %q", got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestSnapshotList checks the one name zfs destroy and release take for
// several snapshots of a filesystem, and that snapshots of two are refused.
func TestSnapshotList(t *testing.T) {
	cases := []struct {
		name    string
		snaps   []string
		want    string
		wantErr string
	}{
		{name: "one", snaps: []string{"tank/a@x"}, want: "tank/a@x"},
		{name: "two", snaps: []string{"tank/a@migrate-1", "tank/a@migrate-final"}, want: "tank/a@migrate-1,migrate-final"},
		{name: "none", wantErr: "no snapshots"},
		{name: "two filesystems", snaps: []string{"tank/a@x", "tank/b@y"}, wantErr: "not of one filesystem"},
		{name: "a dataset", snaps: []string{"tank/a"}, wantErr: "not a snapshot name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SnapshotList(tc.snaps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			back, err := SplitSnapshotList(got)
			if err != nil || !reflect.DeepEqual(back, tc.snaps) {
				t.Errorf("SplitSnapshotList(%q) = %q, %v; want %q", got, back, err, tc.snaps)
			}
		})
	}
}

func TestClientRefusesBeforeRunning(t *testing.T) {
	r := &recordingRunner{}
	c := NewClient(r)
	err := c.Create(t.Context(), "tank/-o", nil)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	if len(r.calls) != 0 {
		t.Fatalf("a process ran: %q", r.calls)
	}
}

func TestListManyArgs(t *testing.T) {
	cases := []struct {
		name    string
		roots   []string
		want    string // the operands after -o <columns>
		wantErr bool
	}{
		{name: "one root is ListArgs", roots: []string{"tank/nomad"}, want: "tank/nomad"},
		{name: "several roots in order", roots: []string{"tank/a/a-2", "tank/a/a-1"}, want: "tank/a/a-2 tank/a/a-1"},
		{name: "none", roots: nil, wantErr: true},
		{name: "a root read as a flag", roots: []string{"tank/a", "-r"}, wantErr: true},
		{name: "a snapshot", roots: []string{"tank/a@s"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, err := ListManyArgs(tc.roots, []string{"x:y"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got := strings.Join(args[8:], " "); got != tc.want || args[6] != "-o" {
				t.Fatalf("args %q", args)
			}
		})
	}
}
