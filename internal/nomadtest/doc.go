// Package nomadtest runs a real Nomad agent (server and client in one
// process) for integration and end-to-end tests; Config.Servers makes a
// client-only agent that joins another, for tests across two nodes.
//
// Each agent gets its own data dir, free loopback ports for http, rpc and
// serf, and a real config file, so several agents can run in parallel on
// one machine. Start waits until the HTTP API answers, a leader exists and
// the local node is "ready", and registers cleanup that stops the agent,
// kills anything it left running under its data dir, unmounts what it
// mounted there, and prints the tail of the agent log when the test failed.
//
// The agent must run as root (the client mounts a tmpfs per task secrets
// dir). The binary comes from Binary: $NOMAD_BINARY, or the cached build
// made by tools/nomad-bin.sh. Set NDZ_SKIP_NOMAD=1 to skip tests that need
// it.
//
//	a := nomadtest.Start(t, nomadtest.Config{Binary: nomadtest.Binary(t)})
//	a.RunJob(t, jobHCL)
//	a.WaitAllocs(t, "hello", nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), time.Minute)
package nomadtest
