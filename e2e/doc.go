// Package e2e holds the end-to-end tests: a real Nomad agent (server and
// client, from internal/nomadtest) loads the plugin binary from its
// plugin_dir, and the plugin drives a real OpenZFS (kernel module, zfs and
// zpool) on pools the tests create from file vdevs.
//
// Every test file carries the build tag e2e, and the tests run only inside
// the throw-away QEMU VM of e2e/vm, as root, where they may create, break,
// export and destroy pools. Run them from the module root with
//
//	make e2e                                  # or: scripts/e2e.sh
//	scripts/e2e.sh -test.run 'Quota|Restart'  # extra arguments go to the test binary
//
// scripts/e2e.sh builds the test binary and the plugin (static, CGO_ENABLED=0),
// copies the Nomad binary (tools/nomad-bin.sh) next to them, boots one VM
// with e2e/vm/run-in-vm.sh and runs the test binary once in it. The binary
// reads its configuration from the environment, which run-in-vm.sh forwards
// into the guest:
//
//	NDZ_E2E_NOMAD       the nomad binary (else $NOMAD_BINARY)
//	NDZ_E2E_PLUGIN_DIR  a directory holding the nomad-device-zfs and nomad-device-zfs-ctl binaries
//	NDZ_E2E_LOG_DIR     if set, each test's agent log is written there
//	NDZ_E2E_LOG_LEVEL   the client agents' log_level (default DEBUG; TRACE
//	                    logs each zfs command the plugin runs, with its duration)
//	NDZ_E2E_DISK        a blank disk (/dev/vda) for the pool of the test that
//	                    writes a gigabyte, too much for the guest's memory
//	NDZ_E2E_DOCKER      1: the TestDocker* tests must find the Docker engine
//	                    of the docker variant of the image (NDZ_VM_DOCKER=1,
//	                    scripts/e2e.sh's default) and fail without it
//
// Each test makes its own pool on file vdevs under the guest's /tmp, starts
// its own agent (internal/nomadtest) with a data dir there, and checks the
// facts on the real datasets with the project's zfs package, cross-checked
// with github.com/mistifyio/go-zfs/v3. The tests run in parallel (see
// scripts/e2e.sh). A task that must hold its slot while the test looks at
// the data waits for the test's go-ahead (see held): when an allocation
// ends, the plugin releases its slot, by default destroying the data.
//
// No wait has a fixed deadline: every timeout is what the wait takes on an
// idle guest, stretched by the guest's measured slowness (pace_test.go,
// nomadtest.Deadline), so the suite holds beside a second VM or a compile
// on the same cores. Nor does anything a test checks expire on a fixed
// clock meanwhile: a retain or sticky_wait the test waits out is paced
// (stretched likewise when the agent starts), a check of data that
// expires runs only when it cannot race the expiry (leftBefore), and a
// task that must finish its shutdown has a kill_timeout far beyond it. The agents' heartbeat grace and the plugin's
// reserve_timeout are raised for the same reason (see startAgentWith).
//
// Tests across nodes run a real cluster in the one guest (startCluster,
// cluster_helpers_test.go): a server agent and client nodes, each with its
// own pool, parent and plugin configuration, its plugin talking to its own
// agent. TestPartitionReconnect cuts a node off by stopping its agent
// (SIGSTOP; its plugin and tasks run on) with short heartbeats, whose grace
// stretches with the guest's slowness like every wait, and records what the
// agents showed (timeline_test.go) for docs/lifecycle.md.
//
// The TestDocker* tests start containerd and dockerd in the guest
// (docker_engine_test.go), import a busybox root filesystem under the
// image name the example job uses, and run examples/job-docker.nomad.hcl.
//
// The guest's two emulated vCPUs are the suite's budget: an idle agent
// with its plugin takes about a sixth of one, a zfs command 0.1-0.2 s of
// CPU. Tests poll once a second (waitFor), tests that wait on no scan use
// a longer scan_interval (startAgentScan), and each agent logs the CPU its
// process tree used at cleanup; the suite's total and the guest's lowest
// available memory are printed at the end. Eight tests at once fit in the
// default 2 GiB; all of them at once ran the guest out of memory.
package e2e
