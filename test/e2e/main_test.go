// Package e2e runs konglet as a real process against a real kube-apiserver
// and a strict Kong admin API double, and checks what Kong would route and
// what the API server shows.
package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/konglet/konglet/test/cluster"
	"github.com/konglet/konglet/test/kongdouble"
)

var (
	env     *cluster.Cluster
	konglet string // the binary under test
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = cluster.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	dir, err := os.MkdirTemp("", "konglet-e2e-")
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

// process is one running konglet.
type process struct {
	cmd     *exec.Cmd
	Metrics string // base URL of /metrics, /healthz, /readyz
	done    chan struct{}
	mu      sync.Mutex
	logs    []string
}

// startKonglet runs konglet against the test cluster and the given Kong
// double; it is stopped when the test ends.
func startKonglet(t *testing.T, kong *kongdouble.Double, args ...string) *process {
	t.Helper()
	addr := freeAddress(t)
	all := append([]string{"run",
		"--kubeconfig", env.Kubeconfig,
		"--kong-admin-url", kong.URL(),
		"--listen", addr,
		"--kong-poll-interval", "100ms",
		"--log-level", "debug",
	}, args...)
	p := &process{cmd: exec.Command(konglet, all...), Metrics: "http://" + addr, done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
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

// Stop ends the process (SIGTERM) and waits for it.
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

func (p *process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

func (p *process) raced() bool {
	return strings.Contains(p.Logs(), "WARNING: DATA RACE")
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		case <-poll.C:
		}
	}
}
