//go:build bench

package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/konglet/konglet/test/harness"
)

// proc is one running konglet, with its RSS sampled every 100 ms from the
// moment it started.
type proc struct {
	cmd     *exec.Cmd
	Started time.Time // just before exec
	Metrics string    // base URL of /metrics
	done    chan struct{}

	mu      sync.Mutex
	logTail []string
	lines   int
	rss     []sample  // VmRSS in bytes
	gc      []gcCycle // with GODEBUG=gctrace=1
	stopped bool
}

type sample struct {
	At    time.Duration // since Started
	Bytes int64
}

// startKonglet runs konglet against the cluster and the Kong double.
func (b *bencher) startKonglet(t *testing.T, kong *kong, extra ...string) *proc {
	t.Helper()
	return b.startKongletEnv(t, kong, nil, extra...)
}

// startKongletEnv is startKonglet with extra environment (GODEBUG,
// GOMEMLIMIT): the runtime's own knobs, no change to konglet.
func (b *bencher) startKongletEnv(t *testing.T, kong *kong, env []string, extra ...string) *proc {
	t.Helper()
	addr := freeAddress(t)
	args := append([]string{"run",
		"--kubeconfig", b.env.Kubeconfig,
		"--kong-admin-url", kong.URL(),
		"--listen", addr,
		"--kong-poll-interval", "100ms",
		"--gateway", gatewayNS + "/" + gatewayName,
		"--publish-service", gatewayNS + "/kong-proxy",
		"--log-level", "info",
	}, extra...)
	p := &proc{cmd: exec.Command(b.konglet, args...), Metrics: "http://" + addr, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			if line := s.Text(); strings.HasPrefix(line, "gc ") {
				p.gc = append(p.gc, gcLine(time.Since(p.Started), line))
				p.mu.Unlock()
				continue
			}
			p.lines++
			p.logTail = append(p.logTail, s.Text())
			if len(p.logTail) > 400 {
				p.logTail = p.logTail[len(p.logTail)-200:]
			}
			p.mu.Unlock()
		}
	}()
	go p.sampleRSS()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || os.Getenv("KONGLET_BENCH_LOGS") != "" {
			t.Logf("konglet log tail:\n%s", p.Logs())
		}
	})
	return p
}

func (p *proc) sampleRSS() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, ok := vmRSS(p.cmd.Process.Pid); ok {
			p.mu.Lock()
			p.rss = append(p.rss, sample{At: time.Since(p.Started), Bytes: v})
			p.mu.Unlock()
		}
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
	}
}

// vmRSS reads VmRSS of a process from /proc.
func vmRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err == nil
			}
		}
	}
	return 0, false
}

// RSS returns the samples taken so far.
func (p *proc) RSS() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.rss...)
}

// MaxRSS is the largest sample so far.
func (p *proc) MaxRSS() int64 {
	var m int64
	for _, s := range p.RSS() {
		m = max(m, s.Bytes)
	}
	return m
}

// Stop ends the process (SIGTERM) and waits for it.
func (p *proc) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.cmd.Wait()
}

// Exited tells whether the process ended by itself.
func (p *proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("(%d lines in all; the last %d)\n%s", p.lines, len(p.logTail), strings.Join(p.logTail, "\n"))
}

// LogsContaining returns the tail lines that contain s.
func (p *proc) LogsContaining(s string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.logTail {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// scrape reads /metrics as name{labels} -> value.
func (p *proc) scrape() (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.Metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, nil
}

// metric reads one series (0 when absent or unreachable).
func (p *proc) metric(series string) float64 {
	m, err := p.scrape()
	if err != nil {
		return 0
	}
	return m[series]
}

func freeAddress(t *testing.T) string {
	t.Helper()
	addr, err := harness.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// poll calls check every interval until it returns true or the timeout
// passes (false).
func poll(interval, timeout time.Duration, check func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if check() {
			return true
		}
		select {
		case <-deadline.C:
			return check()
		case <-tick.C:
		}
	}
}

// logTime is when konglet first logged msg, since its start (false when the
// line is not in the kept tail).
func (p *proc) logTime(msg string) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.logTail {
		if !strings.Contains(l, `"msg":"`+msg+`"`) {
			continue
		}
		var line struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(l), &line) == nil {
			return line.Time.Sub(p.Started), true
		}
	}
	return 0, false
}

// gcCycle is one line of GODEBUG=gctrace=1: heap at the start of the
// cycle, at its end, and the live (marked) heap, in MB.
type gcCycle struct {
	At                     time.Duration
	Start, End, Live, Goal int
}

var gcHeap = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

func gcLine(at time.Duration, line string) gcCycle {
	c := gcCycle{At: at}
	if m := gcHeap.FindStringSubmatch(line); m != nil {
		c.Start, _ = strconv.Atoi(m[1])
		c.End, _ = strconv.Atoi(m[2])
		c.Live, _ = strconv.Atoi(m[3])
		c.Goal, _ = strconv.Atoi(m[4])
	}
	return c
}

// GC returns the GC cycles seen so far.
func (p *proc) GC() []gcCycle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]gcCycle(nil), p.gc...)
}
