package nomadtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartFailure runs an agent with cfg that is expected to refuse to start
// (a plugin configuration it rejects, say) and returns what it printed. It
// fails the test if the agent is still running after timeout — then it did
// start — and kills it.
func StartFailure(t testing.TB, cfg Config, timeout time.Duration) string {
	t.Helper()
	cfg = cfg.withDefaults(t)
	p, err := freePorts()
	if err != nil {
		t.Fatalf("free ports: %v", err)
	}
	path := filepath.Join(cfg.DataDir, "agent.hcl")
	if err := os.WriteFile(path, []byte(renderConfig(cfg, p)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Binary, "agent", "-config", path)
	cmd.Dir = cfg.DataDir
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agent was still running after %s; it was expected to refuse to start. Output tail:\n%s", timeout, tail(out.String(), cleanupTail))
	}
	if err == nil {
		t.Fatalf("agent exited 0; it was expected to refuse to start. Output tail:\n%s", tail(out.String(), cleanupTail))
	}
	return out.String()
}
