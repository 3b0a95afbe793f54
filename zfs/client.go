package zfs

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Client is the domain API over a Runner: one method per operation the
// plugin needs, each one zfs or zpool process.
type Client struct {
	r Runner
}

// NewClient returns a Client that runs its commands with r.
func NewClient(r Runner) *Client { return &Client{r: r} }

// List scans root and everything below it (filesystems and snapshots) with
// the given user properties, in one process. A missing root is ErrNotExist;
// any other failure is returned as is and never means "empty".
func (c *Client) List(ctx context.Context, root string, userProps []string) ([]Dataset, error) {
	return c.ListMany(ctx, []string{root}, userProps)
}

// ListMany is List for several roots in one process. One missing root
// fails the whole listing with ErrNotExist.
func (c *Client) ListMany(ctx context.Context, roots []string, userProps []string) ([]Dataset, error) {
	args, err := ListManyArgs(roots, userProps)
	return c.list(ctx, args, err, userProps)
}

// ListAll is List with volumes too, for a received copy: it is what its
// stream made it, and a volume's stream makes a volume (a zvol), which
// List does not show (its snapshots, it does). Each row also carries the
// receive_resume_token of an interrupted receive (Dataset.ResumeToken).
func (c *Client) ListAll(ctx context.Context, root string, userProps []string) ([]Dataset, error) {
	args, err := ListAllArgs(root, userProps)
	if err != nil {
		return nil, invalid(err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return nil, err
	}
	return parseList(out, copyColumns, userProps)
}

// list runs a listing built by ListManyArgs (argErr: the builder's error)
// and parses it.
func (c *Client) list(ctx context.Context, args []string, argErr error, userProps []string) ([]Dataset, error) {
	if argErr != nil {
		return nil, invalid(argErr)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return nil, err
	}
	return ParseList(out, userProps)
}

// Pools lists the given pools (all when none). A missing pool is ErrNotExist.
func (c *Client) Pools(ctx context.Context, pools ...string) ([]Pool, error) {
	args, err := ZpoolListArgs(pools...)
	if err != nil {
		return nil, invalid(err)
	}
	out, err := c.r.Run(ctx, "zpool", args...)
	if err != nil {
		return nil, err
	}
	return ParsePools(out)
}

// Create creates filesystem name with props; its parent must exist.
func (c *Client) Create(ctx context.Context, name string, props map[string]string) error {
	return c.zfs(ctx)(CreateArgs(name, props))
}

// Clone creates filesystem name from snapshot snap.
func (c *Client) Clone(ctx context.Context, snap, name string, props map[string]string) error {
	return c.zfs(ctx)(CloneArgs(snap, name, props))
}

// Snapshot creates snapshot name (dataset@snap).
func (c *Client) Snapshot(ctx context.Context, name string, props map[string]string) error {
	return c.zfs(ctx)(SnapshotArgs(name, props))
}

// Destroy destroys name. Destroying what is already gone is success, so a
// release can be retried after a crash at any point.
func (c *Client) Destroy(ctx context.Context, name string, o DestroyOptions) error {
	err := c.zfs(ctx)(DestroyArgs(name, o))
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// Rollback rolls the snapshot's filesystem back to it.
func (c *Client) Rollback(ctx context.Context, snap string, destroyNewer bool) error {
	return c.zfs(ctx)(RollbackArgs(snap, destroyNewer))
}

// Set sets properties on name in one process.
func (c *Client) Set(ctx context.Context, name string, props map[string]string) error {
	return c.zfs(ctx)(SetArgs(name, props))
}

// Inherit clears a locally set property on name.
func (c *Client) Inherit(ctx context.Context, name, prop string) error {
	return c.zfs(ctx)(InheritArgs(name, prop))
}

// Rename renames a filesystem.
func (c *Client) Rename(ctx context.Context, oldName, newName string) error {
	return c.zfs(ctx)(RenameArgs(oldName, newName))
}

// Hold places hold tag on snap, so it cannot be destroyed until released.
// A hold that already exists is success.
func (c *Client) Hold(ctx context.Context, tag, snap string) error {
	err := c.zfs(ctx)(HoldArgs(tag, snap))
	if errors.Is(err, ErrExists) {
		return nil
	}
	return err
}

// Release removes hold tag from snap. A hold or snapshot already gone is
// success.
func (c *Client) Release(ctx context.Context, tag, snap string) error {
	err := c.zfs(ctx)(ReleaseArgs(tag, snap))
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// Holds lists the holds on snap.
func (c *Client) Holds(ctx context.Context, snap string) ([]Hold, error) {
	args, err := HoldsArgs(snap)
	if err != nil {
		return nil, invalid(err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return nil, err
	}
	return ParseHolds(out)
}

// Mount mounts a filesystem at its mountpoint. Already mounted is success.
func (c *Client) Mount(ctx context.Context, name string) error {
	err := c.zfs(ctx)(MountArgs(name))
	if errors.Is(err, ErrMounted) {
		return nil
	}
	return err
}

// Version returns the first line of `zfs version` (the userland version),
// e.g. "zfs-2.1.11-1+deb12u1".
func (c *Client) Version(ctx context.Context) (string, error) {
	out, err := c.r.Run(ctx, "zfs", "version")
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

// zfs returns a function that runs one zfs command from a builder's result,
// so each method reads as the one command it is: c.zfs(ctx)(CreateArgs(...)).
func (c *Client) zfs(ctx context.Context) func(args []string, err error) error {
	return func(args []string, err error) error {
		if err != nil {
			return invalid(err)
		}
		_, err = c.r.Run(ctx, "zfs", args...)
		return err
	}
}

// invalid marks an argument rejected before any process ran.
func invalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalid, err) }
