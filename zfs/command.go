package zfs

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Verb is a zfs subcommand a lifecycle plan may run.
type Verb string

// The verbs of the slot lifecycle: everything it changes, it changes with
// one of these. None recurses (-r) and none forces (-f): ZFS itself refuses
// when something appeared that the plan did not read.
const (
	VerbCreate   Verb = "create"
	VerbClone    Verb = "clone"
	VerbSnapshot Verb = "snapshot"
	VerbDestroy  Verb = "destroy"
	VerbRollback Verb = "rollback"
	VerbSet      Verb = "set"
	VerbInherit  Verb = "inherit"
	VerbRename   Verb = "rename"
	VerbHold     Verb = "hold"
	VerbRelease  Verb = "release"
	VerbMount    Verb = "mount"
	// VerbReceiveAbort discards an interrupted resumable receive's partial
	// state (zfs receive -A).
	VerbReceiveAbort Verb = "receive -A"
	// VerbBookmark bookmarks snapshot Name as Arg ("pool/fs#name"): what
	// an incremental send needs of it, without its blocks.
	VerbBookmark Verb = "bookmark"
)

// Command is one zfs command as data: what a plan of the slot lifecycle
// lists, and what Client.Exec runs. Its argv comes from the builders of
// this package, so a Command is checked exactly as the methods' arguments
// are.
type Command struct {
	Verb Verb
	// Name is the dataset or snapshot the command acts on; for a destroy
	// or a release, several snapshots of one filesystem in zfs's form,
	// "tank/a@x,y" (SnapshotList): one process for all of them.
	Name string
	// Arg is the new name of a rename, the origin snapshot of a clone, the
	// tag of a hold or release, and the property an inherit clears.
	Arg string
	// Props are set by a create, clone, snapshot or set.
	Props map[string]string
}

// Args is the command's argv after "zfs".
func (c Command) Args() ([]string, error) {
	switch c.Verb {
	case VerbCreate:
		return CreateArgs(c.Name, c.Props)
	case VerbClone:
		return CloneArgs(c.Arg, c.Name, c.Props)
	case VerbSnapshot:
		return SnapshotArgs(c.Name, c.Props)
	case VerbDestroy:
		return DestroyArgs(c.Name, DestroyOptions{})
	case VerbRollback:
		return RollbackArgs(c.Name, false)
	case VerbSet:
		return SetArgs(c.Name, c.Props)
	case VerbInherit:
		return InheritArgs(c.Name, c.Arg)
	case VerbRename:
		return RenameArgs(c.Name, c.Arg)
	case VerbHold:
		return HoldArgs(c.Arg, c.Name)
	case VerbRelease:
		return ReleaseArgs(c.Arg, c.Name)
	case VerbMount:
		return MountArgs(c.Name)
	case VerbReceiveAbort:
		return ReceiveAbortArgs(c.Name)
	case VerbBookmark:
		return BookmarkArgs(c.Name, c.Arg)
	}
	return nil, fmt.Errorf("unknown zfs verb %q", c.Verb)
}

// String is the command in short, for logs and tests: the verb, the name,
// the argument, and the names of the properties it sets (sorted), e.g.
// "set tank/nomad/scratch/scratch-1 {nomad-device-zfs:state}".
func (c Command) String() string {
	var b strings.Builder
	b.WriteString(string(c.Verb))
	b.WriteByte(' ')
	b.WriteString(c.Name)
	if c.Arg != "" {
		b.WriteByte(' ')
		b.WriteString(c.Arg)
	}
	if len(c.Props) > 0 {
		keys := make([]string, 0, len(c.Props))
		for k := range c.Props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" {")
		b.WriteString(strings.Join(keys, ","))
		b.WriteByte('}')
	}
	return b.String()
}

// Exec runs one command as it is: unlike the methods, it reads no failure
// as success (a destroy of what is gone fails with ErrNotExist). What a
// failure means is for the plan that lists the command to say.
func (c *Client) Exec(ctx context.Context, cmd Command) error {
	return c.zfs(ctx)(cmd.Args())
}
