package plugin

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// classNameRE: class names become device names, dataset components, slot IDs
// and environment variable names. Starting with a letter keeps slot IDs from
// ever parsing as a number in a job's constraint.
var classNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// reservedProps are properties the plugin controls itself.
var reservedProps = map[string]string{
	"mountpoint": "slots are mounted below the parent's mountpoint, where Reserve finds them",
	"canmount":   "slots must be mounted to be handed to a task",
	"zoned":      "slots are mounted by the host",
}

// maxSlots bounds one class; each slot is a dataset and a device instance.
const maxSlots = 1024

// validate checks everything that can be checked without touching the host,
// naming the key and the value in every error. It has no side effects.
func (c *Config) validate() (*Settings, error) {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	parentOK := validateParent(c.Parent) == nil
	if err := validateParent(c.Parent); err != nil {
		bad("parent = %q: %v", c.Parent, err)
	}
	scan, err := boundedDuration(c.ScanInterval, minScanInterval)
	if err != nil {
		bad("scan_interval = %q: %v", c.ScanInterval, err)
	}
	timeout, err := boundedDuration(c.ZFSTimeout, minZFSTimeout)
	if err != nil {
		bad("zfs_timeout = %q: %v", c.ZFSTimeout, err)
	}
	reserve, err := boundedDuration(c.ReserveTimeout, minReserveTimeout)
	if err != nil {
		bad("reserve_timeout = %q: %v", c.ReserveTimeout, err)
	}
	nomad := c.Nomad.watcherConfig()
	errs = append(errs, checkNomad(nomad.Config)...)
	var metricsAddr string
	if c.Metrics != nil {
		metricsAddr = c.Metrics.Address
		if err := checkListenAddress(metricsAddr); err != nil {
			bad("metrics.address = %q: %v", metricsAddr, err)
		}
	}
	if len(c.Classes) == 0 {
		bad(`no class block: at least one class "<name>" { slots = N } is needed`)
	}

	names := make([]string, 0, len(c.Classes))
	for name := range c.Classes {
		names = append(names, name)
	}
	sort.Strings(names)
	envNames := map[string]string{}
	mounts := map[string]string{}
	var classes []model.Class
	for _, name := range names {
		cc := c.Classes[name]
		class, problems := cc.validate(name, c.Parent)
		errs = append(errs, problems...)
		if other, ok := envNames[envKey(name)]; ok {
			bad("class %q: its environment variables (ZFS_%s_*) would collide with class %q", name, envKey(name), other)
		}
		envNames[envKey(name)] = name
		if other, ok := mounts[class.MountPath]; ok {
			bad("class %q: mount = %q is also class %q's mount", name, class.MountPath, other)
		}
		mounts[class.MountPath] = name
		classes = append(classes, class)
	}
	if parentOK {
		errs = append(errs, checkLayout(c.Parent, classes)...)
	}
	xfer, problems := c.Transfer.resolve()
	errs = append(errs, problems...)
	for _, cl := range classes {
		if cl.Migrate.Enabled && c.Transfer == nil {
			bad("class %q: migrate needs the plugin's transfer block: the address its data is sent from and received on, and the TLS files", cl.Name)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid nomad-device-zfs config: %s", strings.Join(errs, "; "))
	}
	return &Settings{
		Slots:          model.Config{Parent: c.Parent, Classes: classes, ScanInterval: scan},
		ZFSTimeout:     timeout,
		ReserveTimeout: reserve,
		Nomad:          nomad,
		Transfer:       xfer,
		MetricsAddress: metricsAddr,
	}, nil
}

// hostnameRE is a DNS name as a listen address may hold one.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// checkListenAddress checks a host:port to listen on without listening
// (SetConfig has no side effects): a numeric port, and an IP address, a
// host name or nothing (every interface) before it. Whether it is free is
// known only when the plugin listens.
func checkListenAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("not host:port (e.g. \"127.0.0.1:9646\", or \":9646\" for every interface)")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if _, err := netip.ParseAddr(host); host != "" && err != nil && !hostnameRE.MatchString(host) {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

// watcherConfig maps the nomad block onto the watcher's configuration. Its
// files are checked when the watcher starts, not here: a token file written
// later (by a Vault agent, say) must not keep the Nomad agent from starting.
func (n *NomadConfig) watcherConfig() allocwatch.Config {
	if n == nil {
		return allocwatch.Config{}
	}
	return allocwatch.Config{
		Config: nomadapi.Config{
			Address: n.Address, Token: n.Token, TokenFile: n.TokenFile,
			CAFile: n.CAFile, CertFile: n.CertFile, KeyFile: n.KeyFile, TLSServerName: n.TLSServerName,
			AllowPlaintextToken: n.AllowPlaintextToken,
		},
		ClientIDFile: n.ClientIDFile,
	}
}

// checkNomad refuses what no retry can fix: an address that is no agent's,
// half a client key pair, two tokens, a token the block itself would send in
// the clear. It reads no file (see watcherConfig) and no environment: the
// operator CLI resolves the same block in a shell whose NOMAD_* are not the
// agent's. SetConfig adds the environment (checkTransport).
func checkNomad(n nomadapi.Config) []string {
	var errs []string
	if n.Address != "" {
		if err := nomadapi.CheckAddress(n.Address); err != nil {
			errs = append(errs, fmt.Sprintf("nomad.address = %q: %v", n.Address, err))
		}
	}
	if n.Token != "" && n.TokenFile != "" {
		errs = append(errs, fmt.Sprintf("nomad: token and token_file = %q are both set; use one", n.TokenFile))
	}
	if n.CertFile != "" && n.KeyFile == "" {
		errs = append(errs, fmt.Sprintf("nomad.cert_file = %q: needs key_file, its private key", n.CertFile))
	}
	if n.KeyFile != "" && n.CertFile == "" {
		errs = append(errs, fmt.Sprintf("nomad.key_file = %q: needs cert_file, its certificate", n.KeyFile))
	}
	if n.Address != "" && (n.Token != "" || n.TokenFile != "") {
		if err := checkTransport(n); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

// checkTransport refuses a token sent over plain http to a host that is not
// loopback, counting the NOMAD_ADDR and NOMAD_TOKEN the plugin inherits from
// the agent, as the watcher will use them.
func checkTransport(n nomadapi.Config) error {
	if n.PlaintextToken() && !n.AllowPlaintextToken {
		return fmt.Errorf("nomad.address = %q: %w (nomad.allow_plaintext_token = true)", n.AgentAddress(), nomadapi.ErrPlaintextToken)
	}
	return nil
}

// validate checks one class block; parent is the block's. The class's
// Parent is its own parent, or the block's when it names none (or an
// invalid one: that is reported here, and nothing else is checked
// against it).
func (cc *ClassConfig) validate(name, parent string) (model.Class, []string) {
	var errs []string
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Sprintf("class %q: ", name)+fmt.Sprintf(format, a...))
	}
	if cc.Parent != "" {
		if err := validateParent(cc.Parent); err != nil {
			bad("parent = %q: %v", cc.Parent, err)
		} else {
			parent = cc.Parent
		}
	}
	if !classNameRE.MatchString(name) {
		errs = append(errs, fmt.Sprintf("class %q: invalid name: it must start with a letter and contain only letters, digits, '_' and '-' (at most 64)", name))
	}
	if cc.Slots < 1 || cc.Slots > maxSlots || cc.Slots != math.Trunc(cc.Slots) {
		bad("slots = %v: must be between 1 and %d, a whole number", cc.Slots, maxSlots)
	}
	mount := cc.Mount
	if mount == "" {
		mount = "/zfs/" + name
	}
	switch {
	case !path.IsAbs(mount) || path.Clean(mount) != mount || mount == "/":
		bad("mount = %q: must be a clean absolute path other than /", cc.Mount)
	case strings.Contains(mount, ","):
		bad("mount = %q: must not hold a comma: with several slots the task's environment lists their paths joined by commas", cc.Mount)
	case strings.ContainsFunc(mount, unicode.IsControl):
		bad("mount = %q: must not hold a newline or another control character: no task driver mounts at such a path", cc.Mount)
	}
	var need uint64
	keys := make([]string, 0, len(cc.Properties))
	for k := range cc.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cc.Properties[k]
		if why, ok := reservedProps[k]; ok {
			bad("properties: %s = %q: set by the plugin (%s)", k, v, why)
			continue
		}
		if strings.HasPrefix(k, model.PropPrefix) {
			bad("properties: %s = %q: the %s* properties are the plugin's own", k, v, model.PropPrefix)
			continue
		}
		if err := zfs.ValidateProperty(k, v); err != nil {
			bad("properties: %s = %q: %v", k, v, err)
			continue
		}
		if (k == "reservation" || k == "refreservation") && v != "none" {
			if n, _ := zfs.ParseSize(v); n > need {
				need = n
			}
		}
	}
	if len(errs) == 0 {
		if err := zfs.ValidateProperties(cc.Properties); err != nil {
			bad("properties: %v", err)
		}
	}
	release, problems := cc.Release.validate()
	for _, p := range problems {
		bad("release: %s", p)
	}
	if cc.FromSnapshot != "" {
		if err := validateOrigin(cc.FromSnapshot, parent); err != nil {
			bad("from_snapshot = %q: %v", cc.FromSnapshot, err)
		}
	}
	wait, err := boundedDuration(cc.StickyWait, minStickyWait)
	if err != nil {
		bad("sticky_wait = %q: %v", cc.StickyWait, err)
	}
	migrate, problems := cc.Migrate.validate(cc.Sticky)
	for _, p := range problems {
		bad("migrate: %s", p)
	}
	replicate, problems := cc.Replicate.validate(cc.Migrate != nil)
	for _, p := range problems {
		bad("replicate: %s", p)
	}
	return model.Class{Name: name, Parent: parent, Slots: int(cc.Slots), Properties: cc.Properties, MountPath: mount, NeedBytes: need,
		Release: release, FromSnapshot: cc.FromSnapshot, Sticky: cc.Sticky, StickyWait: wait, Migrate: migrate,
		Replicate: replicate}, errs
}

// validate reads a migrate block; nil is a class whose data stays on its
// node. It needs sticky = true: what migrates is the data a sticky class
// hands to its replacement.
func (mc *MigrateConfig) validate(sticky bool) (model.Migrate, []string) {
	if mc == nil {
		return model.Migrate{}, nil
	}
	var errs []string
	if !sticky {
		errs = append(errs, "needs sticky = true: the data that follows a replacement to another node is what a sticky class hands to it")
	}
	timeout, err := boundedDuration(mc.Timeout, time.Second)
	if err != nil {
		errs = append(errs, fmt.Sprintf("timeout = %q: %v", mc.Timeout, err))
	}
	switch mc.OnTimeout {
	case model.MigrateFail, model.MigrateStartEmpty:
	default:
		errs = append(errs, fmt.Sprintf("on_timeout = %q: must be %q (fail the start, so that Nomad restarts the task) or %q",
			mc.OnTimeout, model.MigrateFail, model.MigrateStartEmpty))
	}
	return model.Migrate{Enabled: true, Timeout: timeout, OnTimeout: mc.OnTimeout}, errs
}

// validate reads a release block. The spec gives an absent block its
// defaults, so a nil one comes only from a Config not decoded by the spec.
func (r *ReleaseConfig) validate() (model.Release, []string) {
	var out model.Release
	if r == nil {
		return out, []string{"no release block decoded (the configuration did not go through the plugin's spec)"}
	}
	var errs []string
	var err error
	if out.Policy, err = model.ParsePolicy(r.Policy); err != nil {
		errs = append(errs, fmt.Sprintf("policy = %q: %v", r.Policy, err))
	}
	if r.OnFailure != "" {
		if out.OnFailure, err = model.ParsePolicy(r.OnFailure); err != nil {
			errs = append(errs, fmt.Sprintf("on_failure = %q: %v", r.OnFailure, err))
		}
	}
	if out.Retain, err = boundedDuration(r.Retain, minRetain); err != nil {
		errs = append(errs, fmt.Sprintf("retain = %q: %v", r.Retain, err))
	}
	if r.RetainMax < 0 || r.RetainMax != math.Trunc(r.RetainMax) || r.RetainMax > math.MaxInt32 {
		errs = append(errs, fmt.Sprintf("retain_max = %v: must be a whole number, 0 (no limit) or more", r.RetainMax))
	}
	out.RetainMax = int(r.RetainMax)
	return out, errs
}

// validateOrigin checks a class's from_snapshot: a snapshot name, in the
// pool of the class's parent (zfs clones only within a pool). checkLayout
// keeps it outside every parent.
func validateOrigin(snap, parent string) error {
	if err := zfs.ValidateName(snap, true); err != nil {
		return err
	}
	if parent != "" && zfs.PoolOf(snap) != zfs.PoolOf(parent) {
		return fmt.Errorf("it is in pool %q, the class's parent %q in pool %q: zfs clones only within one pool",
			zfs.PoolOf(snap), parent, zfs.PoolOf(parent))
	}
	return nil
}

// checkLayout checks the parents against the classes (each with its
// parent set): no parent is, or is below, a class's dataset (the plugin
// owns that dataset and destroys it with the class, and would work inside
// its own slots' tree), and no from_snapshot is below a parent (everything
// there is the plugin's to destroy or roll back, and a slot cloned from it
// would block, or be lost with, its origin). parent is the block's.
func checkLayout(parent string, classes []model.Class) []string {
	var errs []string
	below := func(name, dataset string) bool { return name == dataset || strings.HasPrefix(name, dataset+"/") }
	inClass := func(key, p string) {
		for _, c := range classes {
			ds := c.Parent + "/" + c.Name
			switch {
			case p == ds:
				errs = append(errs, fmt.Sprintf("%s = %q: it is class %q's dataset, which the plugin creates and destroys; "+
					"choose a dataset outside every class's", key, p, c.Name))
			case below(p, ds):
				errs = append(errs, fmt.Sprintf("%s = %q: it is below class %q's dataset %s, which the plugin creates and destroys; "+
					"choose a dataset outside every class's", key, p, c.Name, ds))
			}
		}
	}
	inClass("parent", parent)
	parents := []string{parent}
	for _, c := range classes {
		if c.Parent != parent {
			inClass(fmt.Sprintf("class %q: parent", c.Name), c.Parent)
		}
		if !slices.Contains(parents, c.Parent) {
			parents = append(parents, c.Parent)
		}
	}
	for _, c := range classes {
		if c.FromSnapshot == "" {
			continue
		}
		for _, p := range parents {
			if below(zfs.Parent(c.FromSnapshot), p) {
				errs = append(errs, fmt.Sprintf("class %q: from_snapshot = %q: it is below parent %q, where the plugin creates and destroys "+
					"datasets; keep the golden snapshot outside it", c.Name, c.FromSnapshot, p))
			}
		}
	}
	return errs
}

// validateParent checks the parent dataset's name: absolute (pool first), no
// snapshot, every component safe on a command line.
func validateParent(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("required: the dataset the plugin works below, e.g. \"tank/nomad\"")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("a dataset name, not a path: write it as pool/dataset without a leading '/'")
	case strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || p == "." || p == "..":
		return fmt.Errorf("must be a full dataset name starting with the pool, not a relative name")
	}
	if err := zfs.ValidateName(p, false); err != nil {
		return err
	}
	// Leave room below it for <class>/<class>-<n>.
	if len(p)+2*64+8 > zfs.MaxNameLen {
		return fmt.Errorf("too long to hold <class>/<slot> datasets (ZFS names are at most %d characters)", zfs.MaxNameLen)
	}
	return nil
}

// Lower bounds of the durations. Each guards against a typo that would
// otherwise look healthy: a 1ns scan_interval is a zfs fork bomb, a 1ms
// zfs_timeout kills every zfs command, a 1ms reserve_timeout fails every
// task start that must wait, a 1s retain destroys kept data at once.
const (
	minScanInterval   = time.Second
	minZFSTimeout     = time.Second
	minReserveTimeout = time.Second
	minRetain         = time.Minute
	minStickyWait     = time.Minute
)

// boundedDuration reads a Go duration of at least min.
func boundedDuration(s string, min time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (e.g. \"15s\", \"2m\")")
	}
	switch {
	case d <= 0:
		return 0, fmt.Errorf("must be positive, at least %s", min)
	case d < min:
		return 0, fmt.Errorf("must be at least %s", min)
	}
	return d, nil
}

// envKey is a class name as it appears in environment variable names.
func envKey(class string) string {
	return strings.ToUpper(strings.ReplaceAll(class, "-", "_"))
}

// resolve maps the transfer block onto the transport's configuration and
// checks it, files included (transfer.Config.Validate): a missing or
// unreadable file, a key that is not the certificate's, a certificate the
// CA did not sign or that names no Nomad agent of the region is an error
// now, naming the key and its value, not at the first transfer. Reading
// the files is the check's only I/O. nil, nil when the block is absent.
func (tc *TransferConfig) resolve() (*transfer.Config, []string) {
	if tc == nil {
		return nil, nil
	}
	cfg := &transfer.Config{Address: tc.Address, CAFile: tc.CAFile, CertFile: tc.CertFile, KeyFile: tc.KeyFile, Region: tc.Region,
		RequireNodeIdentity: tc.RequireNodeIdentity}
	err := cfg.Validate()
	if err == nil {
		return cfg, nil
	}
	var errs []string
	for _, line := range strings.Split(err.Error(), "\n") {
		errs = append(errs, "transfer."+line)
	}
	return nil, errs
}
