// Package harness runs konglet as a real process for the tests that need
// one (end to end, deployment, benchmarks): build it, start it against an
// API server and a Kong admin API, collect its logs, stop it, poll for
// conditions with a deadline.
package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/konglet/konglet/test/cluster"
)

// Build compiles konglet into dir; race adds the race detector. Without
// it, konglet is built as the image and `make build` build it (static, no
// cgo, no symbol table), so that what the benchmarks measure is what ships:
// a cgo binary maps the C library too (about 1.3 MiB more resident).
func Build(dir string, race bool) (string, error) {
	bin := dir + "/konglet"
	args := []string{"build", "-o", bin}
	env := os.Environ()
	if race {
		args = append(args, "-race")
	} else {
		args = append(args, "-trimpath", "-ldflags=-s -w")
		env = append(env, "CGO_ENABLED=0")
	}
	cmd := exec.Command("go", append(args, "github.com/konglet/konglet/cmd/konglet")...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building konglet: %v\n%s", err, out)
	}
	return bin, nil
}

// Process is one running konglet.
type Process struct {
	cmd *exec.Cmd
	// Started is the moment just before the process was started.
	Started time.Time
	done    chan struct{}
	mu      sync.Mutex
	logs    []string
	// listening is closed once address, where konglet serves, is known.
	listening chan struct{}
	address   string
}

// Options adjust StartWith: environment added to the test's, and a filter
// that sees each stderr line first (true: the line is taken, and not kept
// in Logs).
type Options struct {
	Env  []string
	Take func(line string) bool
}

// Start runs `konglet run` from bin with the kubeconfig and the Kong admin
// URL, quick Kong polls and debug logs, then args.
func Start(bin, kubeconfig, kongURL string, args ...string) (*Process, error) {
	return StartWith(Options{}, bin, kubeconfig, kongURL, args...)
}

// StartWith is Start with Options.
func StartWith(opts Options, bin, kubeconfig, kongURL string, args ...string) (*Process, error) {
	// Port 0: konglet binds a free port and logs it (a port picked here
	// could be taken by another process before konglet binds it).
	all := append([]string{"run",
		"--kubeconfig", kubeconfig,
		"--kong-admin-url", kongURL,
		"--listen", "127.0.0.1:0",
		"--kong-poll-interval", "100ms",
		"--log-level", "debug",
	}, args...)
	p := &Process{cmd: exec.Command(bin, all...), done: make(chan struct{}), listening: make(chan struct{})}
	if opts.Env != nil {
		p.cmd.Env = append(os.Environ(), opts.Env...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p.Started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			p.noteAddress(s.Text())
			if opts.Take != nil && opts.Take(s.Text()) {
				continue
			}
			p.mu.Lock()
			p.logs = append(p.logs, s.Text())
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// noteAddress takes where konglet serves from its start line.
func (p *Process) noteAddress(line string) {
	if p.address != "" || !strings.Contains(line, `"msg":"konglet starting"`) {
		return
	}
	var start struct{ Listen string }
	if json.Unmarshal([]byte(line), &start) == nil && start.Listen != "" {
		p.address = start.Listen
		close(p.listening)
	}
}

// Metrics is the base URL of /metrics, /healthz and /readyz; it waits for
// konglet to say where it serves (at most 30 s, or until it exits: then
// the URL has no port, and requests to it fail).
func (p *Process) Metrics() string {
	select {
	case <-p.listening:
		return "http://" + p.address
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
	select {
	case <-p.listening:
		return "http://" + p.address
	default:
		return "http://127.0.0.1:0"
	}
}

// StartForTest is Start for one test: stopped when it ends, its logs shown
// if it failed, and a data race in konglet a failure.
func StartForTest(t *testing.T, bin, kubeconfig, kongURL string, args ...string) *Process {
	t.Helper()
	return StartWithForTest(t, Options{}, bin, kubeconfig, kongURL, args...)
}

// StartWithForTest is StartForTest with Options.
func StartWithForTest(t *testing.T, opts Options, bin, kubeconfig, kongURL string, args ...string) *Process {
	t.Helper()
	p, err := StartWith(opts, bin, kubeconfig, kongURL, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("konglet logs:\n%s", p.Logs())
		}
		if strings.Contains(p.Logs(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a data race in konglet:\n%s", p.Logs())
		}
	})
	return p
}

// Stop ends the process (SIGINT) and waits for it.
func (p *Process) Stop() {
	if p.Exited() {
		_ = p.cmd.Wait()
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

// Exited tells whether the process has ended (before Stop: a crash).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs is everything the process wrote on stderr so far (but the lines
// Options.Take took).
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

// Poll calls check every interval until it returns nil (nil) or timeout
// has passed (its last error).
func Poll(timeout, interval time.Duration, check func() error) error {
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

// Eventually polls check every 10 ms until it returns nil, and fails the
// test with check's last error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(timeout, 10*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Setup starts the API server and builds konglet (with the race detector)
// for a test package's TestMain; cleanup stops and removes both.
func Setup() (env *cluster.Cluster, bin string, cleanup func(), err error) {
	if env, err = cluster.Start(); err != nil {
		return nil, "", nil, err
	}
	dir, err := os.MkdirTemp("", "konglet-test-")
	if err != nil {
		_ = env.Stop()
		return nil, "", nil, err
	}
	cleanup = func() {
		_ = env.Stop()
		_ = os.RemoveAll(dir)
	}
	if bin, err = Build(dir, true); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return env, bin, cleanup, nil
}
