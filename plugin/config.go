package plugin

import (
	"time"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// configSpec is the plugin's HCL schema. Defaults live here and only here;
// docs/configuration.md's key table is checked against it by a test
// (configdoc_test.go).
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"parent": hclspec.NewAttr("parent", "string", true),
	"scan_interval": hclspec.NewDefault(
		hclspec.NewAttr("scan_interval", "string", false),
		hclspec.NewLiteral(`"15s"`),
	),
	"zfs_timeout": hclspec.NewDefault(
		hclspec.NewAttr("zfs_timeout", "string", false),
		hclspec.NewLiteral(`"2m"`),
	),
	"reserve_timeout": hclspec.NewDefault(
		hclspec.NewAttr("reserve_timeout", "string", false),
		hclspec.NewLiteral(`"1m"`),
	),
	"nomad":   hclspec.NewBlock("nomad", false, nomadSpec),
	"metrics": hclspec.NewBlock("metrics", false, metricsSpec),
	"class":   hclspec.NewBlockMap("class", []string{"name"}, classSpec),
	// transfer: see transferSpec.
	"transfer": hclspec.NewBlock("transfer", false, transferSpec),
})

// metricsSpec is the opt-in Prometheus endpoint: without the block the
// plugin listens on nothing.
var metricsSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"address": hclspec.NewAttr("address", "string", true),
})

// nomadSpec says how the allocation watcher reaches the local Nomad agent.
// Unset keys fall back to the NOMAD_* environment the agent passes on.
var nomadSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"address":         hclspec.NewAttr("address", "string", false),
	"token":           hclspec.NewAttr("token", "string", false),
	"token_file":      hclspec.NewAttr("token_file", "string", false),
	"ca_file":         hclspec.NewAttr("ca_file", "string", false),
	"cert_file":       hclspec.NewAttr("cert_file", "string", false),
	"key_file":        hclspec.NewAttr("key_file", "string", false),
	"tls_server_name": hclspec.NewAttr("tls_server_name", "string", false),
	"client_id_file":  hclspec.NewAttr("client_id_file", "string", false),
	"allow_plaintext_token": hclspec.NewDefault(
		hclspec.NewAttr("allow_plaintext_token", "bool", false),
		hclspec.NewLiteral(`false`),
	),
})

// transferSpec is the `transfer { ... }` block: the transport that moves
// an allocation's data to the node of its replacement (package transfer),
// over mutual TLS with the files a Nomad operator already has. Without
// the block, the plugin neither sends nor receives.
var transferSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"address": hclspec.NewDefault(
		hclspec.NewAttr("address", "string", false),
		hclspec.NewLiteral(`"0.0.0.0:4680"`),
	),
	"ca_file":   hclspec.NewAttr("ca_file", "string", true),
	"cert_file": hclspec.NewAttr("cert_file", "string", true),
	"key_file":  hclspec.NewAttr("key_file", "string", true),
	"region": hclspec.NewDefault(
		hclspec.NewAttr("region", "string", false),
		hclspec.NewLiteral(`"global"`),
	),
	"require_node_identity": hclspec.NewDefault(
		hclspec.NewAttr("require_node_identity", "bool", false),
		hclspec.NewLiteral(`false`),
	),
})

// The release block's defaults, written once: the block's own keys and the
// value an absent block decodes to both use them, so a class without a
// release block is exactly a class with an empty one.
const (
	defaultPolicy    = `"destroy"`
	defaultRetain    = `"72h"`
	defaultRetainMax = `10`
)

// releaseSpec is a class's `release { ... }` block.
var releaseSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"policy": hclspec.NewDefault(
		hclspec.NewAttr("policy", "string", false),
		hclspec.NewLiteral(defaultPolicy),
	),
	"on_failure": hclspec.NewAttr("on_failure", "string", false),
	"retain": hclspec.NewDefault(
		hclspec.NewAttr("retain", "string", false),
		hclspec.NewLiteral(defaultRetain),
	),
	"retain_max": hclspec.NewDefault(
		hclspec.NewAttr("retain_max", "number", false),
		hclspec.NewLiteral(defaultRetainMax),
	),
})

// releaseDefault is what an absent release block decodes to.
var releaseDefault = hclspec.NewLiteral(`{ policy = ` + defaultPolicy + `, on_failure = "", retain = ` +
	defaultRetain + `, retain_max = ` + defaultRetainMax + ` }`)

// classSpec is one `class "<name>" { ... }` block.
var classSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	// No default in the spec: an unset parent is the block's, which only
	// validation knows.
	"parent": hclspec.NewAttr("parent", "string", false),
	"slots": hclspec.NewDefault(
		hclspec.NewAttr("slots", "number", false),
		hclspec.NewLiteral(`1`),
	),
	// A block of attributes, not a map(string) attribute: the agent reads its
	// file with HCL1, which turns `properties = { ... }` into a list of maps
	// that a map attribute refuses. Both spellings decode as block attrs.
	"properties": hclspec.NewBlockAttrs("properties", "string", false),
	"mount": hclspec.NewDefault(
		hclspec.NewAttr("mount", "string", false),
		hclspec.NewLiteral(`""`),
	),
	"from_snapshot": hclspec.NewAttr("from_snapshot", "string", false),
	"sticky": hclspec.NewDefault(
		hclspec.NewAttr("sticky", "bool", false),
		hclspec.NewLiteral(`false`),
	),
	"sticky_wait": hclspec.NewDefault(
		hclspec.NewAttr("sticky_wait", "string", false),
		hclspec.NewLiteral(`"1h"`),
	),
	"release": hclspec.NewDefault(
		hclspec.NewBlock("release", false, releaseSpec),
		releaseDefault,
	),
	// migrate: see migrateSpec; nil when absent (the data stays on its node).
	"migrate": hclspec.NewBlock("migrate", false, migrateSpec),
	// replicate: see replicateSpec (replicate.go); nil when absent.
	"replicate": hclspec.NewBlock("replicate", false, replicateSpec),
})

// migrateSpec is a sticky class's `migrate { ... }` block: its data
// follows its replacement to another node (model/migrate.go), over the
// plugin's transfer block.
var migrateSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"timeout": hclspec.NewDefault(
		hclspec.NewAttr("timeout", "string", false),
		hclspec.NewLiteral(`"10m"`),
	),
	"on_timeout": hclspec.NewDefault(
		hclspec.NewAttr("on_timeout", "string", false),
		hclspec.NewLiteral(`"fail"`),
	),
})

// Config is the decoded `config` block of `plugin "nomad-device-zfs"`.
type Config struct {
	Parent         string       `codec:"parent"`
	ScanInterval   string       `codec:"scan_interval"`
	ZFSTimeout     string       `codec:"zfs_timeout"`
	ReserveTimeout string       `codec:"reserve_timeout"`
	Nomad          *NomadConfig `codec:"nomad"`
	// Metrics is nil without a metrics block: no endpoint.
	Metrics *MetricsConfig `codec:"metrics"`
	// Classes holds pointers: decoding into a map of structs reuses one
	// value for every entry, so pointers and maps inside it (release,
	// properties) ended up shared by all classes.
	Classes map[string]*ClassConfig `codec:"class"`
	// Transfer is the transfer block; nil when absent.
	Transfer *TransferConfig `codec:"transfer"`
}

// TransferConfig is the decoded `transfer` block (transfer.Config).
type TransferConfig struct {
	Address  string `codec:"address"`
	CAFile   string `codec:"ca_file"`
	CertFile string `codec:"cert_file"`
	KeyFile  string `codec:"key_file"`
	Region   string `codec:"region"`
	// RequireNodeIdentity: see transfer.Config.
	RequireNodeIdentity bool `codec:"require_node_identity"`
}

// NomadConfig is the decoded `nomad` block.
type NomadConfig struct {
	Address       string `codec:"address"`
	Token         string `codec:"token"`
	TokenFile     string `codec:"token_file"`
	CAFile        string `codec:"ca_file"`
	CertFile      string `codec:"cert_file"`
	KeyFile       string `codec:"key_file"`
	TLSServerName string `codec:"tls_server_name"`
	ClientIDFile  string `codec:"client_id_file"`
	// AllowPlaintextToken: see nomadapi.Config.AllowPlaintextToken.
	AllowPlaintextToken bool `codec:"allow_plaintext_token"`
}

// MetricsConfig is the decoded `metrics` block.
type MetricsConfig struct {
	// Address is host:port to serve /metrics on, e.g. "127.0.0.1:9646".
	Address string `codec:"address"`
}

// ReleaseConfig is the decoded `release` block of a class.
type ReleaseConfig struct {
	Policy    string  `codec:"policy"`
	OnFailure string  `codec:"on_failure"`
	Retain    string  `codec:"retain"`
	RetainMax float64 `codec:"retain_max"`
}

// ClassConfig is one decoded class block.
type ClassConfig struct {
	// Parent is the dataset the class lives below; "" means the block's.
	Parent string `codec:"parent"`
	// Slots and RetainMax are read as any number so that 1.5 is refused
	// by validate, naming the key, not by the decoder, which does not.
	Slots      float64           `codec:"slots"`
	Properties map[string]string `codec:"properties"`
	// Mount is the path inside the task; "" means /zfs/<class>.
	Mount        string `codec:"mount"`
	FromSnapshot string `codec:"from_snapshot"`
	// Sticky hands an allocation's data to its replacement on this node;
	// StickyWait bounds how long it waits for one (model.Class).
	Sticky     bool           `codec:"sticky"`
	StickyWait string         `codec:"sticky_wait"`
	Release    *ReleaseConfig `codec:"release"`
	// Migrate is the migrate block; nil when absent.
	Migrate *MigrateConfig `codec:"migrate"`
	// Replicate is the replicate block; nil when absent.
	Replicate *ReplicateConfig `codec:"replicate"`
}

// MigrateConfig is the decoded `migrate` block of a class.
type MigrateConfig struct {
	Timeout   string `codec:"timeout"`
	OnTimeout string `codec:"on_timeout"`
}

// Settings is a validated Config in the types the rest of the product uses;
// the operator CLI reads the same one the plugin runs with.
type Settings struct {
	Slots          model.Config
	ZFSTimeout     time.Duration
	ReserveTimeout time.Duration
	Nomad          allocwatch.Config
	// Transfer is the transport's configuration, checked with its files;
	// nil when the block is absent (no transfers).
	Transfer *transfer.Config
	// MetricsAddress is where the Prometheus endpoint listens, "" for none.
	MetricsAddress string
}

// Resolve validates c, as SetConfig does, and maps it.
func (c *Config) Resolve() (*Settings, error) { return c.validate() }
