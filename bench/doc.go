// Package bench holds the whole-process benchmarks of issue-level targets:
// the plugin binary hosted exactly as a Nomad client hosts it, over the fake
// zfs executables, measured from outside (RSS of the plugin process, time
// to the first offered device). They are behind the build tag bench:
//
//	go test -tags bench -run . -v ./bench
//
// `make bench` runs them with the Go benchmarks of the packages and the
// scripts that measure real OpenZFS in the e2e VM; docs/performance.md has
// the results.
package bench
