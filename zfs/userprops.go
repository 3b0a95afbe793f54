package zfs

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// UserProps are the user properties a listing asked for, with one row's
// values. A scan keeps one per dataset, so it is a compact stand-in for a
// map: the names are the listing's, shared by all its rows, and the values
// stay as zfs printed them, a tab-separated tail of the row's own copy. A
// map of nine properties cost about 600 bytes a row; this costs 40.
type UserProps struct {
	// names are the properties asked for, in the order asked.
	names []string
	// vals are their values in the same order, tab-separated, "-" for unset.
	vals string
}

// Get returns the value of user property name, "" when it has none or was
// not asked for.
func (u UserProps) Get(name string) string {
	i := slices.Index(u.names, name)
	if i < 0 {
		return ""
	}
	v := u.vals
	for ; i > 0; i-- {
		_, v, _ = strings.Cut(v, "\t")
	}
	v, _, _ = strings.Cut(v, "\t")
	if v == "-" {
		return ""
	}
	return v
}

// All yields the properties that have a value, in the order asked.
func (u UserProps) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		rest := u.vals
		for _, name := range u.names {
			var v string
			v, rest, _ = strings.Cut(rest, "\t")
			if v != "-" && !yield(name, v) {
				return
			}
		}
	}
}

// Len is the number of properties that have a value.
func (u UserProps) Len() int {
	n := 0
	for range u.All() {
		n++
	}
	return n
}

// UserPropsOf returns the properties of m, for a row made by hand (tests,
// fakes) rather than listed. A value holding a tab or a newline cannot come
// from `zfs list -H` (its row would fail the column check), so it is a
// programming error and panics.
func UserPropsOf(m map[string]string) UserProps {
	names := slices.Sorted(maps.Keys(m))
	vals := make([]string, len(names))
	for i, name := range names {
		v := m[name]
		if strings.ContainsAny(v, "\t\n") {
			panic(fmt.Sprintf("zfs.UserPropsOf: %s = %q holds a tab or newline, which no listing can return", name, v))
		}
		if v == "" {
			v = "-"
		}
		vals[i] = v
	}
	return UserProps{names: names, vals: strings.Join(vals, "\t")}
}
