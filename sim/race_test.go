//go:build race

package sim

// raceEnabled: under the race detector a schedule runs many times slower,
// so `go test -race ./...` runs a sample; `make sim` runs the full count.
const raceEnabled = true
