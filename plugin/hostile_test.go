package plugin

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/hardening.md from TestHostileConfigs")

// hostile is one configuration an operator might write, hostile or careless.
type hostile struct {
	name string
	body string // the config block's body, without the config braces
	// names are what the error must contain: the key and the bad value.
	// nil means the configuration is valid and must be accepted.
	names []string
	// keyOnly: refused by the agent's HCL decoder, whose message names
	// the key but not the value.
	keyOnly bool
}

// The builders write one bad key into an otherwise valid configuration.
const okParent = `parent = "tank/nomad"`

func propCase(k, v string) hostile {
	return hostile{name: k + "=" + v,
		body:  okParent + "\nclass \"a\" {\nproperties = { " + strconv.Quote(k) + " = " + strconv.Quote(v) + " }\n}",
		names: []string{k + " = " + strconv.Quote(v)}}
}

func propsCase(name string, props map[string]string, names ...string) hostile {
	var kv []string
	for k, v := range props {
		kv = append(kv, strconv.Quote(k)+" = "+strconv.Quote(v))
	}
	return hostile{name: name, body: okParent + "\nclass \"a\" {\nproperties = { " + strings.Join(kv, ", ") + " }\n}", names: names}
}

func topCase(k, v string) hostile {
	return hostile{name: k + "=" + v, body: okParent + "\n" + k + " = " + v + "\nclass \"a\" {}", names: []string{k, v}}
}

func classCase(k, v string) hostile {
	return hostile{name: k + "=" + v, body: okParent + "\nclass \"a\" {\n" + k + " = " + v + "\n}", names: []string{k, v}}
}

func releaseCase(k, v string) hostile {
	return hostile{name: k + "=" + v, body: okParent + "\nclass \"a\" {\nrelease {\n" + k + " = " + v + "\n}\n}", names: []string{k, v}}
}

func nomadCase(name string, names []string, lines ...string) hostile {
	return hostile{name: name, body: okParent + "\nnomad {\n" + strings.Join(lines, "\n") + "\n}\nclass \"a\" {}", names: names}
}

func metricsCase(addr string) hostile {
	return hostile{name: "metrics " + addr, body: okParent + "\nmetrics {\naddress = " + strconv.Quote(addr) + "\n}\nclass \"a\" {}",
		names: []string{"metrics.address = " + strconv.Quote(addr)}}
}

func ok(h hostile) hostile { h.names = nil; return h }

// keyOnly is a type error, refused by the agent's own HCL decoder before
// the plugin sees the value: its message names the key, not the value.
func keyOnly(h hostile) hostile { h.names, h.keyOnly = h.names[:1], true; return h }

// hostileClasses are the classes of input tried, in the order of the table
// in docs/hardening.md.
var hostileClasses = []struct {
	class string
	cases []hostile
}{
	{"sizes zfs refuses (suffix, space, sign, overflow, base)", sizes(false)},
	{"sizes below what zfs accepts for the property", []hostile{
		propCase("quota", "0"), propCase("quota", "1K"), propCase("refquota", "512K"),
		propCase("recordsize", "256"), propCase("recordsize", "100K"), propCase("recordsize", "2M"), propCase("recordsize", "16M"),
		propCase("special_small_blocks", "3"), propCase("special_small_blocks", "2M"), propCase("special_small_blocks", "1536K"),
	}},
	{"property names zfs refuses (unknown, read-only, case, flag-like)", func() (out []hostile) {
		for _, k := range []string{"bogusprop", "QUOTA", "Compression", "-o", "used", "available", "referenced", "type",
			"creation", "origin", "mounted", "volsize", "volblocksize", "guid", "com.Example:team", "com.example:Team", "a b:c", "x=y", "compress ion"} {
			out = append(out, propCase(k, "on"))
		}
		return out
	}()},
	{"property values zfs refuses (unknown, case, out of range)", func() (out []hostile) {
		for _, kv := range [][2]string{
			{"compression", "bogus"}, {"compression", "LZ4"}, {"compression", "Lz4"}, {"compression", "gzip-10"},
			{"compression", "zstd-20"}, {"compression", "zstd-fast-11"}, {"compression", "gzip-0"},
			{"atime", "ON"}, {"atime", "yes"}, {"atime", "true"}, {"atime", "1"}, {"checksum", "SHA256"}, {"checksum", "md5"},
			{"copies", "0"}, {"copies", "4"}, {"sync", "Always"}, {"xattr", "SA"}, {"dedup", "edonr"}, {"dedup", "ON"},
			{"casesensitivity", "Insensitive"}, {"logbias", "fast"}, {"primarycache", "some"}, {"snapdir", "Visible"},
			{"dnodesize", "32k"}, {"redundant_metadata", "bogus"}, {"encryption", "aes-256-xts"}, {"keyformat", "pem"},
			{"keylocation", "file://relative"}, {"pbkdf2iters", "1000"}, {"pbkdf2iters", "-1"}, {"refreservation", "auto"},
			{"com.example:note", "two\nlines"}, {"com.example:note", "a\tb"}, {"com.example:note", strings.Repeat("x", 8192)},
		} {
			out = append(out, propCase(kv[0], kv[1]))
		}
		return out
	}()},
	{"property pairs zfs refuses together, or the plugin cannot use", []hostile{
		propsCase("normalization without utf8only", map[string]string{"normalization": "formD", "utf8only": "off"}, `normalization = "formD"`, "utf8only"),
		propsCase("pbkdf2iters without passphrase", map[string]string{"pbkdf2iters": "350000", "encryption": "on", "keyformat": "raw", "keylocation": "file:///k"}, "pbkdf2iters", `"passphrase"`),
		propsCase("keyformat without encryption", map[string]string{"keyformat": "hex", "encryption": "off"}, `keyformat = "hex"`, `encryption = "off"`),
		propsCase("keylocation prompt", map[string]string{"keylocation": "prompt"}, `keylocation = "prompt"`),
	}},
	{"properties the plugin owns", []hostile{
		propCase("mountpoint", "/x"), propCase("canmount", "off"), propCase("zoned", "on"),
		propCase("nomad-device-zfs:state", "ready"), propCase("nomad-device-zfs:holder", "x"),
	}},
	{"durations (not a duration, or below the bound)", []hostile{
		topCase("scan_interval", `"1ns"`), topCase("scan_interval", `"0s"`), topCase("scan_interval", `"-1s"`),
		topCase("scan_interval", `"500ms"`), topCase("scan_interval", `"often"`), topCase("scan_interval", `"15"`),
		topCase("zfs_timeout", `"1ms"`), topCase("zfs_timeout", `"0"`), topCase("zfs_timeout", `"2 minutes"`),
		topCase("reserve_timeout", `"1us"`), topCase("reserve_timeout", `"-1m"`),
		releaseCase("retain", `"1s"`), releaseCase("retain", `"3 days"`), releaseCase("retain", `"0"`),
	}},
	{"numbers and types", []hostile{
		classCase("slots", "0"), classCase("slots", "-1"), classCase("slots", "1025"), classCase("slots", "1.5"),
		keyOnly(classCase("slots", `"four"`)), keyOnly(classCase("slots", "true")),
		releaseCase("retain_max", "-1"), releaseCase("retain_max", "2.5"), keyOnly(releaseCase("retain_max", `"ten"`)),
		keyOnly(topCase("scan_interval", "[1]")), keyOnly(classCase("mount", "[1]")), keyOnly(classCase("properties", `"quota=1G"`)),
	}},
	{"names (parent, class, mount)", []hostile{
		{name: "parent path", body: `parent = "/tank/nomad"` + "\nclass \"a\" {}", names: []string{`"/tank/nomad"`}},
		{name: "parent flag", body: `parent = "tank/-r"` + "\nclass \"a\" {}", names: []string{`"tank/-r"`}},
		{name: "parent space", body: `parent = "tank/my data"` + "\nclass \"a\" {}", names: []string{`"tank/my data"`}},
		{name: "parent snapshot", body: `parent = "tank/nomad@s"` + "\nclass \"a\" {}", names: []string{`"tank/nomad@s"`}},
		{name: "parent trailing slash", body: `parent = "tank/nomad/"` + "\nclass \"a\" {}", names: []string{`"tank/nomad/"`}},
		{name: "parent pool digit", body: `parent = "1tank/nomad"` + "\nclass \"a\" {}", names: []string{`"1tank/nomad"`}},
		{name: "parent too long", body: `parent = "tank/` + strings.Repeat("n", 200) + `"` + "\nclass \"a\" {}", names: []string{"parent", "too long"}},
		{name: "class flag", body: okParent + "\nclass \"-o\" {}", names: []string{`class "-o"`}},
		{name: "class slash", body: okParent + "\nclass \"a/b\" {}", names: []string{`class "a/b"`}},
		{name: "class space", body: okParent + "\nclass \"a b\" {}", names: []string{`class "a b"`}},
		{name: "class digit", body: okParent + "\nclass \"1e\" {}", names: []string{`class "1e"`}},
		{name: "class too long", body: okParent + "\nclass \"" + strings.Repeat("c", 65) + "\" {}", names: []string{strings.Repeat("c", 65)}},
		{name: "class env collision", body: okParent + "\nclass \"a-b\" {}\nclass \"a_b\" {}", names: []string{`class "a_b"`, "collide"}},
		classCase("mount", `"data"`), classCase("mount", `"/"`), classCase("mount", `"/a/../b"`),
		classCase("mount", `"/da\nta"`), classCase("mount", `"/da,ta"`), classCase("mount", `"/data\r"`),
	}},
	{"from_snapshot (malformed, below the parent, another pool)", []hostile{
		classCase("from_snapshot", `"tank/golden"`), classCase("from_snapshot", `"tank/golden@"`),
		classCase("from_snapshot", `"tank/golden@-x"`), classCase("from_snapshot", `"@seed"`),
		classCase("from_snapshot", `"tank/nomad@seed"`), classCase("from_snapshot", `"tank/nomad/a/a-1@seed"`),
		classCase("from_snapshot", `"tank/nomad/golden@seed"`), classCase("from_snapshot", `"other/golden@seed"`),
		classCase("from_snapshot", `"tank/golden@a@b"`),
	}},
	{"class parent (malformed, at or below a class's dataset, from_snapshot in another pool)", []hostile{
		classCase("parent", `"/nvme/nomad"`), classCase("parent", `"nvme/-r"`), classCase("parent", `"nvme/nomad@s"`),
		classCase("parent", `"nvme/nomad/"`), classCase("parent", `"./nomad"`),
		{name: "parent is another class's dataset", body: okParent + "\nclass \"a\" {}\nclass \"b\" {\nparent = \"tank/nomad/a\"\n}",
			names: []string{`class "b": parent = "tank/nomad/a"`}},
		{name: "parent below another class's slot", body: okParent + "\nclass \"a\" {}\nclass \"b\" {\nparent = \"tank/nomad/a/a-1\"\n}",
			names: []string{`class "b": parent = "tank/nomad/a/a-1"`}},
		{name: "from_snapshot in the block's pool, class on another", body: okParent + "\nclass \"a\" {\nparent = \"nvme/nomad\"\nfrom_snapshot = \"tank/golden@s\"\n}",
			names: []string{`from_snapshot = "tank/golden@s"`, `"nvme/nomad"`}},
		{name: "from_snapshot below the class's own parent", body: okParent + "\nclass \"a\" {\nparent = \"nvme/nomad\"\nfrom_snapshot = \"nvme/nomad/golden@s\"\n}",
			names: []string{`from_snapshot = "nvme/nomad/golden@s"`, `"nvme/nomad"`}},
	}},
	{"nomad block (address, TLS pairs, tokens)", []hostile{
		nomadCase("address without scheme", []string{`"127.0.0.1:4646"`}, `address = "127.0.0.1:4646"`),
		nomadCase("address ftp", []string{`"ftp://nomad:4646"`}, `address = "ftp://nomad:4646"`),
		nomadCase("address no host", []string{`"http://"`}, `address = "http://"`),
		nomadCase("address no port host", []string{`"https://:4646"`}, `address = "https://:4646"`),
		nomadCase("address unparsable", []string{`"http://%zz"`}, `address = "http://%zz"`),
		nomadCase("unix without path", []string{`"unix://"`}, `address = "unix://"`),
		nomadCase("cert without key", []string{"cert_file", `"/etc/c.pem"`}, `cert_file = "/etc/c.pem"`),
		nomadCase("key without cert", []string{"key_file", `"/etc/k.pem"`}, `key_file = "/etc/k.pem"`),
		nomadCase("token and token_file", []string{"token_file", `"/t"`}, `token = "x"`, `token_file = "/t"`),
		nomadCase("token over http to a remote host", []string{`"http://10.0.0.5:4646"`, "allow_plaintext_token"},
			`address = "http://10.0.0.5:4646"`, `token = "x"`),
		nomadCase("token file over http to a name", []string{`"http://nomad.example:4646"`, "unencrypted"},
			`address = "http://nomad.example:4646"`, `token_file = "/t"`),
		keyOnly(nomadCase("allow_plaintext_token not a bool", []string{"allow_plaintext_token"}, `allow_plaintext_token = "maybe"`)),
	}},
	{"metrics block (address)", []hostile{
		metricsCase("9646"), metricsCase("127.0.0.1"), metricsCase("127.0.0.1:http"), metricsCase("127.0.0.1:65536"),
		metricsCase("http://127.0.0.1:9646"), metricsCase("a b:9646"), metricsCase(""),
	}},
	{"accepted: the same keys with values zfs accepts", accepted()},
}

// sizes lists sizes zfs refuses (bad false) or accepts (bad true), each on
// quota, the property an operator sets most.
func sizes(good bool) (out []hostile) {
	list := []string{"12QB", "1 G", " 1G", "1G ", "-1G", "+1G", "1iB", "1BB", "1BiB", "1GBB", "G", "", ".", "1..5G",
		"0x10", "1e3", "1.5e3K", "16E", "99999999999999999999", "1,5G", "1_000", "1GiBs", "1Z"}
	if good {
		list = []string{"1G", "1g", "1GB", "1gb", "1GiB", "1gib", "1.5T", ".5G", "1.G", "1048576", "1024K", "1M", "1MB", "15E", "0.001Z"}
	}
	for _, v := range list {
		h := propCase("quota", v)
		if good {
			h = ok(h)
		}
		out = append(out, h)
	}
	return out
}

func accepted() []hostile {
	out := sizes(true)
	for _, kv := range [][2]string{
		{"compression", "lz4"}, {"compression", "zstd-fast-1000"}, {"compression", "gzip-9"}, {"atime", "off"},
		{"recordsize", "1M"}, {"recordsize", "512"}, {"special_small_blocks", "0"}, {"special_small_blocks", "128K"},
		{"refreservation", "none"}, {"quota", "none"}, {"com.example:team", "data eng"}, {"xattr", "sa"},
		{"checksum", "sha256"},
	} {
		out = append(out, ok(propCase(kv[0], kv[1])))
	}
	out = append(out,
		ok(propsCase("passphrase encryption", map[string]string{"encryption": "on", "keyformat": "passphrase",
			"keylocation": "file:///etc/zfs/key", "pbkdf2iters": "100000"})),
		ok(propsCase("normalization with utf8only", map[string]string{"normalization": "formD", "utf8only": "on"})),
		ok(metricsCase("127.0.0.1:9646")), ok(metricsCase(":0")),
		ok(topCase("scan_interval", `"1s"`)), ok(topCase("zfs_timeout", `"1s"`)), ok(releaseCase("retain", `"1m"`)),
		ok(classCase("from_snapshot", `"tank/golden@seed"`)), ok(classCase("from_snapshot", `"tank/nomad-golden@seed"`)),
		ok(classCase("parent", `"nvme/nomad"`)), ok(classCase("parent", `"tank/nomad"`)), ok(classCase("parent", `"tank/nomad-fast"`)),
		ok(hostile{name: "class on another pool cloned from its pool", body: okParent + "\nclass \"a\" {\nparent = \"nvme/nomad\"\nfrom_snapshot = \"nvme/golden@s\"\n}"}),
		ok(hostile{name: "two classes share a parent", body: okParent + "\nclass \"a\" {\nparent = \"nvme/nomad\"\n}\nclass \"b\" {\nparent = \"nvme/nomad\"\nmount = \"/b\"\n}"}),
		ok(nomadCase("https with a token", nil, `address = "https://10.0.0.5:4646"`, `token = "x"`)),
		ok(nomadCase("http loopback with a token", nil, `address = "http://127.0.0.1:4646"`, `token = "x"`)),
		ok(nomadCase("unix socket with a token", nil, `address = "unix:///run/nomad.sock"`, `token = "x"`)),
		ok(nomadCase("plaintext allowed", nil, `address = "http://10.0.0.5:4646"`, `token = "x"`, `allow_plaintext_token = true`)),
		ok(nomadCase("mTLS", nil, `address = "https://127.0.0.1:4646"`, `cert_file = "/c"`, `key_file = "/k"`, `ca_file = "/ca"`)),
	)
	return out
}

// TestHostileConfigs feeds every configuration above through the agent's own
// decoding path into SetConfig, on a plugin already running a good
// configuration, and checks for each: a refused one is refused with an error
// naming the key and the value, no zfs runner is built (nothing created),
// and the good configuration stays in force (nothing lost); an accepted one
// is accepted. It writes the counts into docs/hardening.md (-update-docs)
// and fails if the file disagrees, so the published numbers are these.
func TestHostileConfigs(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	t.Setenv("NOMAD_TOKEN", "")
	var rows []string
	total, refusedTotal := 0, 0
	for _, hc := range hostileClasses {
		named, keyNamed, refused, accepted, kept := 0, 0, 0, 0, 0
		for _, h := range hc.cases {
			t.Run(hc.class+"/"+h.name, func(t *testing.T) {
				p := New(hclog.NewNullLogger())
				if err := setConfigFromAgentHCL(t, p, "config {\n"+okParent+"\nclass \"good\" {}\n}"); err != nil {
					t.Fatal(err)
				}
				good := p.settings
				built := false
				p.newRunner = func(*Settings) zfs.Runner { built = true; return nil }
				err := setConfigFromAgentHCL(t, p, "config {\n"+h.body+"\n}")
				if h.names == nil {
					if err != nil {
						t.Fatalf("refused a configuration zfs accepts: %v\n%s", err, h.body)
					}
					accepted++
					return
				}
				if err == nil {
					t.Fatalf("accepted:\n%s", h.body)
				}
				refused++
				all := true
				for _, w := range h.names {
					if !strings.Contains(err.Error(), w) {
						all = false
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				switch {
				case all && h.keyOnly:
					keyNamed++
				case all:
					named++
				}
				if p.settings == good && !built && p.mgr == nil {
					kept++
				} else {
					t.Error("a refused configuration replaced the good one or built a zfs runner")
				}
			})
		}
		total += len(hc.cases)
		refusedTotal += refused
		outcome := fmt.Sprintf("%d refused with an error naming key and value", named)
		if keyNamed > 0 {
			outcome += fmt.Sprintf(", %d naming the key (type errors, from the agent's decoder)", keyNamed)
		}
		if unclear := refused - named - keyNamed; unclear > 0 {
			outcome += fmt.Sprintf(", %d UNCLEAR", unclear)
		}
		outcome += fmt.Sprintf("; nothing created and the running configuration kept: %d of %d", kept, refused)
		if accepted > 0 || refused == 0 {
			outcome = fmt.Sprintf("%d accepted", accepted)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %s |", hc.class, len(hc.cases), outcome))
	}
	table := "| class of input | tried | outcome |\n|---|---|---|\n" + strings.Join(rows, "\n") +
		fmt.Sprintf("\n| **total** | **%d** | **%d refused, %d accepted** |\n", total, refusedTotal, total-refusedTotal)
	syncDoc(t, "../docs/hardening.md", "config-table", table)
}

// syncDoc keeps the part of a document between <!-- begin name --> and
// <!-- end name --> equal to content: -update-docs writes it, a plain run
// fails when it differs.
func syncDoc(t *testing.T, path, name, content string) {
	t.Helper()
	if t.Failed() {
		return
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	head, rest, ok1 := strings.Cut(string(src), begin)
	old, tail, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q … %q section", path, begin, end)
	}
	if old == content {
		return
	}
	if !*updateDocs {
		t.Fatalf("%s is out of date; run go test ./plugin -run %s -update-docs\nwant:\n%s", path, t.Name(), content)
	}
	if err := os.WriteFile(path, []byte(head+begin+content+end+tail), 0o644); err != nil {
		t.Fatal(err)
	}
}
