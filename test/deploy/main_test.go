// Package deploy tests the deployment material (deploy/rbac, deploy/helm,
// docs/metrics.md) against a real kube-apiserver and a konglet process:
// the RBAC is exactly what konglet needs, the sidecar spec of the Helm values
// is a valid and locked-down Pod, and the metric catalogue matches /metrics.
package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/konglet/konglet/test/cluster"
)

var (
	env     *cluster.Cluster
	konglet string // the binary under test, built with -race
	// repo is the repository root, where deploy/ and docs/ are.
	repo string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Join(filepath.Dir(file), "..", "..")
	var err error
	if env, err = cluster.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	dir, err := os.MkdirTemp("", "konglet-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	konglet = filepath.Join(dir, "konglet")
	build := exec.Command("go", "build", "-race", "-o", konglet, "github.com/konglet/konglet/cmd/konglet")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building konglet: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// process is one running konglet (adapted from test/e2e: the kubeconfig is
// the caller's, and starting it does not need a *testing.T so that runs can
// go on in goroutines).
type process struct {
	cmd     *exec.Cmd
	Metrics string // base URL of /metrics, /healthz, /readyz
	done    chan struct{}
	mu      sync.Mutex
	logs    []string
}

// startProcess runs `konglet run` with the kubeconfig and Kong admin URL.
func startProcess(kubeconfig, kongURL string, args ...string) (*process, error) {
	addr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	all := append([]string{"run",
		"--kubeconfig", kubeconfig,
		"--kong-admin-url", kongURL,
		"--listen", addr,
		"--kong-poll-interval", "100ms",
		"--log-level", "debug",
	}, args...)
	p := &process{cmd: exec.Command(konglet, all...), Metrics: "http://" + addr, done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.logs = append(p.logs, s.Text())
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// startKonglet is startProcess for a test: stopped when the test ends, its
// logs shown if the test failed, a data race a failure.
func startKonglet(t *testing.T, kubeconfig, kongURL string, args ...string) *process {
	t.Helper()
	p, err := startProcess(kubeconfig, kongURL, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("konglet logs:\n%s", p.Logs())
		}
		if p.raced() {
			t.Errorf("the race detector reported a data race in konglet:\n%s", p.Logs())
		}
	})
	return p
}

// Stop ends the process (SIGINT) and waits for it.
func (p *process) Stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.cmd.Wait()
}

// exited tells whether the process has ended (before Stop: a crash).
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

func (p *process) raced() bool {
	return strings.Contains(p.Logs(), "WARNING: DATA RACE")
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// poll calls check every interval until it returns nil (nil) or the timeout
// passes (its last error).
func poll(timeout, interval time.Duration, check func() error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-deadline.C:
			return fmt.Errorf("not true after %v: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(timeout, 10*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ptr[T any](v T) *T { return &v }
