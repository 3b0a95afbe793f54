package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// Package is the part of `go list -json` output the check reads.
type Package struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *Module
}

// Module is a package's module as go list reports it.
type Module struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *Module
}

// String is module@version as the report names it, with its replacement.
func (m *Module) String() string {
	s := m.Path
	if m.Version != "" {
		s += "@" + m.Version
	}
	if m.Replace != nil {
		s += " => " + m.Replace.String()
	}
	return s
}

// envWord is a leading NAME=value word of a -list value.
var envWord = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// goList runs `go list -json=... ARGS` in dir, with the environment words of
// spec set, and decodes the packages.
func goList(goCmd, dir, spec string) ([]Package, error) {
	words := strings.Fields(spec)
	var env []string
	for len(words) > 0 && envWord.MatchString(words[0]) {
		env, words = append(env, words[0]), words[1:]
	}
	args := append([]string{"list", "-json=ImportPath,Dir,Standard,Module"}, words...)
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v: %s", spec, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list %s: decoding: %v", spec, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
