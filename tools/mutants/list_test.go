package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestEveryBugCanBePlanted: each bug's find appears exactly once in its
// file as the tree is now, so `make mutants` plants every one (a rename or
// a reformatted line would otherwise drop a bug from the table unseen
// until the long run).
func TestEveryBugCanBePlanted(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range list() {
		if seen[b.name] {
			t.Errorf("bug %s is listed twice", b.name)
		}
		seen[b.name] = true
		orig, err := os.ReadFile(filepath.Join("..", "..", b.file))
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		if n := bytes.Count(orig, []byte(b.find)); n != 1 {
			t.Errorf("%s: its find appears %d times in %s, want once", b.name, n, b.file)
		}
	}
}
