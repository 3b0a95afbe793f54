package zfstest

import (
	"fmt"
	"sort"
	"strings"
)

// get columns, as zfs get -o names them.
var getFields = []string{"name", "property", "value", "received", "source"}

func (s *sess) zfsGet(args []string) int {
	opts, operands, msg := getopt(args, "d:o:s:rt:Hp")
	if msg != "" {
		return s.usage("get", msg)
	}
	scripted, literal, recurse, depth := false, false, false, -1
	fields := []string{"name", "property", "value", "source"}
	sources := map[string]bool{"local": true, "default": true, "inherited": true, "temporary": true, "received": true, "none": true}
	types := tFS | tVol | tSnap | tBookmark
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			literal = true
		case 'r':
			recurse = true
		case 'd':
			if depth, msg = parseDepth(o.arg); msg != "" {
				return s.usage("get", msg)
			}
			recurse = true
		case 'o':
			fields = nil
			for _, f := range strings.Split(o.arg, ",") {
				switch {
				case f == "all":
					fields = append(fields, getFields...)
				case contains(getFields, f):
					fields = append(fields, f)
				default:
					return s.usage("get", fmt.Sprintf("invalid column name '%s'\n", f))
				}
			}
		case 's':
			sources = map[string]bool{}
			for _, f := range strings.Split(o.arg, ",") {
				if !contains([]string{"local", "default", "inherited", "temporary", "received", "none"}, f) {
					return s.usage("get", fmt.Sprintf("invalid source '%s'\n", f))
				}
				sources[f] = true
			}
		case 't':
			if types, msg = parseTypes(o.arg); msg != "" {
				return s.usage("get", msg)
			}
		}
	}
	if len(operands) == 0 {
		return s.usage("get", "missing property argument\n")
	}
	cols, all, msg := parsePropList(operands[0], true)
	if msg != "" {
		return s.usage("get", msg)
	}
	operands = operands[1:]
	if (types == tSnap || types == tBookmark) && len(operands) > 0 && !recurse {
		recurse, depth = true, 1
	}
	nodes, rc := s.collect(operands, types, recurse, depth, types&tSnap != 0)
	sortDatasets(nodes)
	if all {
		cols = append(s.expandAll(nodes), cols...)
	}

	// Column widths, as zprop_print_headers computes them.
	width := map[string]int{"name": 4, "property": 8, "value": 5, "received": 8, "source": 6}
	for _, d := range nodes {
		width["name"] = max(width["name"], len(d.Name))
	}
	width["source"] = max(width["source"], width["name"]+len("inherited from"))
	for _, c := range cols {
		width["property"] = max(width["property"], len(c.name()))
		w, fixed := len(c.user), false
		if c.p != nil {
			w, fixed = c.p.width()
		}
		for _, d := range nodes {
			if v := s.value(d, c, literal); v.ok && (!fixed || literal) {
				w = max(w, len(v.val))
			}
		}
		width["value"] = max(width["value"], w)
	}

	first := true
	for _, d := range nodes {
		for _, c := range cols {
			v := s.value(d, c, literal)
			if !v.ok {
				if all {
					continue // "all" shows only what applies and is set
				}
				v = pval{val: "-"}
			}
			if !sources[v.sourceKind()] {
				continue
			}
			if first && !scripted {
				header := map[string]string{"name": "NAME", "property": "PROPERTY", "value": "VALUE", "received": "RECEIVED", "source": "SOURCE"}
				s.getRow(fields, header, width, false)
			}
			first = false
			row := map[string]string{"name": d.Name, "property": c.name(), "value": v.val, "received": "-", "source": v.sourceText()}
			s.getRow(fields, row, width, scripted)
		}
	}
	return rc
}

func (s *sess) getRow(fields []string, vals map[string]string, width map[string]int, scripted bool) {
	var b strings.Builder
	for i, f := range fields {
		switch {
		case i == len(fields)-1:
			b.WriteString(vals[f])
		case scripted:
			b.WriteString(vals[f] + "\t")
		default:
			fmt.Fprintf(&b, "%-*s  ", width[f], vals[f])
		}
	}
	s.outf("%s\n", b.String())
}

// expandAll is "all": every visible native property, then the user
// properties any of the datasets has (set or inherited), sorted.
func (s *sess) expandAll(nodes []*dataset) []column {
	var cols []column
	for _, p := range props {
		cols = append(cols, column{p: p})
	}
	return append(cols, s.userColumns(nodes)...)
}

// userColumns are the user properties set on or inherited by any node.
func (s *sess) userColumns(nodes []*dataset) []column {
	names := map[string]bool{}
	for _, d := range nodes {
		for x := d; x != nil; x = s.st.Datasets[parentName(x.Name)] {
			for k := range x.Props {
				if isUserProp(k) {
					names[k] = true
				}
			}
		}
	}
	var sorted []string
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var cols []column
	for _, k := range sorted {
		cols = append(cols, column{user: k})
	}
	return cols
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
