package nomadtest

import "testing"

func TestUnescapeMount(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "/tmp/a/b", "/tmp/a/b"},
		{"space", `/tmp/a\040b`, "/tmp/a b"},
		{"trailing backslash", `/tmp/a\`, `/tmp/a\`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unescapeMount(tc.in); got != tc.want {
				t.Errorf("unescapeMount(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
