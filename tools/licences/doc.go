// Command licences checks that every package linked into the project's
// binaries and test binaries is under a licence on an allow-list, and writes
// the THIRD_PARTY_LICENSES file that ships with the release binaries.
//
// It judges licences per folder, not per module: for every package `go list
// -deps` names (the standard library aside), the licence is the nearest
// LICENSE, LICENCE or COPYING file (any case, any suffix such as .md or
// -MIT) from the package's directory up to its module root. That is how
// github.com/hashicorp/nomad is laid out from v1.7.0 on: the root LICENSE is
// the Business Source License 1.1, while plugins/ and a few other folders
// carry an MPL-2.0 LICENSE of their own. The main module's packages are
// judged the same way, so the project needs its own LICENSE.
//
// A licence file passes when github.com/google/licensecheck finds at least
// one licence in it, every licence it finds is on the allow-list (MPL-2.0,
// Apache-2.0, BSD-2-Clause, BSD-3-Clause, MIT, ISC), and the matches cover at
// least minCoverage percent of the file's words. The coverage rule keeps a
// file that adds terms of its own around a known text (a licence's
// "Parameters" block, a field-of-use clause) from passing on the strength of
// the part licensecheck knows. A dual-licensed file passes only when every
// licence in it is allowed; one that is genuinely fine otherwise goes on the
// commented exceptions list (judge.go), never silently.
//
// Usage:
//
//	licences [-v] [-dir D] [-go CMD] [-notice FILE] -list 'ARGS' [-list 'ARGS']...
//
// Each -list is one `go list` run: ARGS are its arguments after `go list`
// (the tool adds -json), and leading NAME=value words set its environment, as
// in -list 'GOOS=linux GOARCH=arm64 CGO_ENABLED=0 -deps ./cmd/...'. Every
// offending folder gets one line naming module@version, folder and the
// licence found; a summary line follows; the exit status is 1 on any
// offender. -v lists every licence file with its verdict and coverage. With
// -notice, the modules the lists link (the main module aside)
// are written to FILE with their licence names and texts.
package main
