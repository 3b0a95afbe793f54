package allocwatch

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// TestConfigValidate: the watcher's own fields, and the connection's
// (internal/nomadapi's TestConfigValidate has all of those) checked with
// them.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; none means valid
	}{
		{name: "zero config uses the environment", cfg: Config{}},
		{name: "node ID", cfg: Config{NodeID: "1cc0a14a-c239-313f-9be4-9ee3e8cc0399"}},
		{name: "client ID file not written yet", cfg: Config{ClientIDFile: missing}},
		{name: "durations", cfg: Config{MinInterval: time.Millisecond, WaitTime: time.Minute}},
		{name: "node ID not a UUID", cfg: Config{NodeID: "../../v1/jobs"},
			wantErr: []string{`NodeID "../../v1/jobs" is not a UUID`}},
		{name: "client ID file is a directory", cfg: Config{ClientIDFile: dir},
			wantErr: []string{"ClientIDFile", "is a directory"}},
		{name: "negative durations", cfg: Config{MinInterval: -time.Second, WaitTime: -time.Minute},
			wantErr: []string{"MinInterval -1s is negative", "WaitTime -1m0s is negative"}},
		{name: "the connection's errors with the watcher's",
			cfg:     Config{Config: nomadapi.Config{Address: "127.0.0.1:4646", CertFile: missing}, NodeID: "x"},
			wantErr: []string{`Address "127.0.0.1:4646" does not parse`, "CertFile", `NodeID "x" is not a UUID`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
			if _, nerr := New(tc.cfg, nil); err != nil && nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
			}
		})
	}
}

// TestConfigDefaults: zero durations take the defaults; set ones stay.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                  string
		cfg                   Config
		minInterval, waitTime time.Duration
	}{
		{name: "defaults", cfg: Config{}, minInterval: DefaultMinInterval, waitTime: time.Minute},
		{name: "config wins", cfg: Config{MinInterval: 2 * time.Second, WaitTime: 5 * time.Minute},
			minInterval: 2 * time.Second, waitTime: 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.withDefaults()
			if cfg.MinInterval != tc.minInterval || cfg.WaitTime != tc.waitTime {
				t.Errorf("MinInterval %s WaitTime %s, want %s %s", cfg.MinInterval, cfg.WaitTime, tc.minInterval, tc.waitTime)
			}
		})
	}
}
