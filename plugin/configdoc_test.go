package plugin

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// specEntry is one documented key: its type and default as
// docs/configuration.md writes them.
type specEntry struct{ typ, def string }

// flattenSpec lists every key of the plugin's schema with its type and
// default: nested keys as "class.slots", a block map as `class "<name>"`.
func flattenSpec(prefix string, s *hclspec.Spec, out map[string]specEntry) {
	switch b := s.Block.(type) {
	case *hclspec.Spec_Object:
		for name, sub := range b.Object.Attributes {
			flattenSpec(prefix+name, sub, out)
		}
	case *hclspec.Spec_Attr:
		def := "none"
		if b.Attr.Required {
			def = "required"
		}
		out[prefix] = specEntry{typ: b.Attr.Type, def: def}
	case *hclspec.Spec_Default:
		flattenSpec(prefix, b.Default.Primary, out)
		if _, block := b.Default.Primary.Block.(*hclspec.Spec_BlockValue); block {
			// An absent block's value: its keys' defaults, documented there.
			return
		}
		e := out[prefix]
		e.def = "`" + b.Default.Default.GetLiteral().GetValue() + "`"
		out[prefix] = e
	case *hclspec.Spec_BlockMap:
		out[prefix+` "<name>"`] = specEntry{typ: "block", def: "none"}
		flattenSpec(prefix+".", b.BlockMap.Nested, out)
	case *hclspec.Spec_BlockValue:
		out[prefix] = specEntry{typ: "block", def: "none"}
		flattenSpec(prefix+".", b.BlockValue.Nested, out)
	case *hclspec.Spec_BlockAttrs:
		out[prefix] = specEntry{typ: "block", def: "none"}
	}
}

// configDocRow is a row of the key table: key, type, default.
var configDocRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([a-z]+) \\| ([^|]+) \\|")

// configDoc is the configuration reference, and keysHeading the section of
// it that holds the key table (up to the next "## " heading).
const (
	configDoc   = "../docs/configuration.md"
	keysHeading = "\n## Keys\n"
)

// TestConfigDocDocumentsEveryKey keeps the configuration reference
// (docs/configuration.md, section "Keys") and the hclspec in agreement: same
// keys, same types, same defaults.
func TestConfigDocDocumentsEveryKey(t *testing.T) {
	want := map[string]specEntry{}
	flattenSpec("", configSpec, want)

	src, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), keysHeading)
	if !ok {
		t.Fatalf("%s has no %q section", configDoc, strings.TrimSpace(keysHeading))
	}
	section, _, _ = strings.Cut(section, "\n## ")
	got := map[string]specEntry{}
	for _, line := range strings.Split(section, "\n") {
		if m := configDocRow.FindStringSubmatch(line); m != nil {
			got[m[1]] = specEntry{typ: m[2], def: strings.TrimSpace(m[3])}
		}
	}

	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, inSpec := want[k]
		g, inDoc := got[k]
		switch {
		case !inDoc:
			t.Errorf("%s does not document %q (%s, default %s)", configDoc, k, w.typ, w.def)
		case !inSpec:
			t.Errorf("%s documents %q, which the spec does not have", configDoc, k)
		case w != g:
			t.Errorf("%q: %s says %s, default %s; spec says %s, default %s", k, configDoc, g.typ, g.def, w.typ, w.def)
		}
	}
}
