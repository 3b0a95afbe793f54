//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// The Docker engine of the docker variant of the guest image
// (e2e/vm/build-docker.sh, NDZ_VM_DOCKER=1): Debian's dockerd, containerd
// and runc in /opt/docker/bin, a busybox root filesystem to import.
const (
	dockerBin    = "/opt/docker/bin"
	dockerRootfs = "/opt/docker/busybox-rootfs.tar"
	dockerSock   = "/var/run/docker.sock" // where Nomad's docker driver looks by default
	dockerLog    = "/tmp/ndz-dockerd.log"
)

// The engine runs as two daemons the tests start themselves: containerd,
// then dockerd on it. dockerd could start its own containerd, but it gives
// it a fixed time to come up, which a busy host missed ("timeout waiting
// for containerd to start"); started apart, containerd gets a wait that
// stretches with the guest's slowness like every other.
const (
	containerdSock   = "/run/ndz-containerd/containerd.sock"
	containerdLog    = "/tmp/ndz-containerd.log"
	containerdConfig = "/tmp/ndz-containerd.toml"
	// Without Kubernetes' CRI plugin, as dockerd runs its own containerd.
	containerdTOML = "version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
)

var containerdArgs = []string{
	"--config=" + containerdConfig, "--root=/tmp/ndz-containerd", "--state=/run/ndz-containerd",
	"--address=" + containerdSock,
}

// dockerdArgs: no bridge network and no iptables (the guest has neither
// the modules nor a network: jobs use network_mode "none"), vfs storage
// (no overlay module; a busybox layer is 2 MB, so copying it per container
// costs nothing), state on tmpfs.
var dockerdArgs = []string{
	"--containerd=" + containerdSock,
	"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
	"--storage-driver=vfs", "--data-root=/tmp/ndz-docker", "--exec-root=/run/ndz-docker",
	"--host=unix://" + dockerSock,
}

// docker is the engine, started once by the first test that needs it and
// stopped by TestMain.
var docker struct {
	once    sync.Once
	err     error
	daemons []*daemon // in start order
	// The one image the tests run (the example job's), imported once.
	imageOnce sync.Once
	image     string
	imageErr  error
}

// requireDocker starts the engine if it is not running yet and imports
// image (the busybox root filesystem) if it is not there yet. Without
// the docker variant of the image the test is skipped, unless the run
// asked for Docker (NDZ_E2E_DOCKER=1, set by scripts/e2e.sh unless
// NDZ_VM_DOCKER=0): then it fails.
func requireDocker(t *testing.T, image string) {
	t.Helper()
	if _, err := os.Stat(dockerBin + "/dockerd"); err != nil {
		if os.Getenv("NDZ_E2E_DOCKER") == "1" {
			t.Fatalf("NDZ_E2E_DOCKER=1 but this guest has no Docker engine: %v", err)
		}
		t.Skip("no Docker engine in this guest (scripts/e2e.sh with NDZ_VM_DOCKER=0)")
	}
	docker.once.Do(func() { docker.err = startDocker() })
	if docker.err != nil {
		t.Fatalf("starting the Docker engine: %v\ncontainerd:\n%s\ndockerd:\n%s",
			docker.err, tailFile(containerdLog, 15), tailFile(dockerLog, 15))
	}
	docker.imageOnce.Do(func() { docker.image, docker.imageErr = image, importImage(image) })
	if docker.imageErr != nil || docker.image != image {
		t.Fatalf("importing %s: %v (imported: %s)", image, docker.imageErr, docker.image)
	}
}

// startDocker starts containerd, then dockerd, each once the one before
// answers.
func startDocker() error {
	t0 := time.Now()
	if err := os.WriteFile(containerdConfig, []byte(containerdTOML), 0o644); err != nil {
		return err
	}
	c, err := startDaemon("containerd", containerdArgs, containerdLog, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", containerdSock)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	docker.daemons = append(docker.daemons, c)
	d, err := startDaemon("dockerd", dockerdArgs, dockerLog, func(ctx context.Context) error {
		_, err := dockerAPI(ctx, http.MethodGet, "/_ping", nil)
		return err
	})
	if err != nil {
		return err
	}
	docker.daemons = append(docker.daemons, d)
	fmt.Printf("e2e: containerd and dockerd ready in %s\n", time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// daemon is a process the tests run until TestMain ends.
type daemon struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once it has exited
}

// startDaemon starts /opt/docker/bin/<name> with its output in logPath and
// waits until ready succeeds: for a minute on an idle guest, stretched by
// the guest's slowness.
func startDaemon(name string, args []string, logPath string, ready func(context.Context) error) (*daemon, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, dockerBin+"/"+name, args...)
	cmd.Env = append(os.Environ(), "PATH="+dockerBin+":"+os.Getenv("PATH")) // the shim, runc
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // a clean shutdown
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		logf.Close()
		return nil, err
	}
	d := &daemon{cancel: cancel, done: make(chan struct{})}
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	deadline := nomadtest.NewDeadline(time.Minute, pace.Slowness)
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err := ready(rctx)
		rcancel()
		if err == nil {
			return d, nil
		}
		select {
		case werr := <-exited:
			return nil, fmt.Errorf("%s exited: %v", name, werr)
		case <-time.After(pollInterval):
		}
		if deadline.Passed() {
			d.stop()
			return nil, fmt.Errorf("%s not ready after %s: %v", name, deadline, err)
		}
	}
}

func (d *daemon) stop() {
	d.cancel()
	<-d.done
}

// stopDocker stops the engine, if a test started it: dockerd first.
func stopDocker() {
	for i := len(docker.daemons) - 1; i >= 0; i-- {
		docker.daemons[i].stop()
	}
}

// importImage imports the busybox root filesystem as image ("name:tag"),
// as `docker import` does: there is no registry to pull from, and Nomad's
// docker driver does not pull an image that is present, unless its tag is
// "latest".
func importImage(image string) error {
	repo, tag, ok := strings.Cut(image, ":")
	if !ok || tag == "latest" {
		return fmt.Errorf("image %q: want name:tag, not latest (Nomad would pull it)", image)
	}
	f, err := os.Open(dockerRootfs)
	if err != nil {
		return err
	}
	defer f.Close()
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	body, err := dockerAPI(ctx, http.MethodPost, "/images/create?"+q.Encode(), f)
	if err != nil {
		return err
	}
	// A stream of JSON messages; a failure is one with "error", under 200 OK.
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var m struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Error != "" {
			return fmt.Errorf("docker import: %s", m.Error)
		}
	}
	return nil
}

// dockerAPI makes one Engine API request on the socket and returns the
// response body; a status other than 2xx is an error.
func dockerAPI(ctx context.Context, method, path string, body *os.File) (string, error) {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", dockerSock)
		},
	}}
	defer c.CloseIdleConnections()
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, method, "http://docker"+path, body)
		req.Header.Set("Content-Type", "application/x-tar")
	} else {
		req, err = http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	}
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(b.String()))
	}
	return b.String(), nil
}

// tailFile returns the last n lines of a file, for failure messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
