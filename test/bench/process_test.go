//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/konglet/konglet/test/harness"
)

// proc is one running konglet, with its RSS sampled every 100 ms from the
// moment it started and its GC cycles (GODEBUG=gctrace=1) recorded.
type proc struct {
	*harness.Process

	mu  sync.Mutex
	rss []sample  // VmRSS in bytes
	gc  []gcCycle // with GODEBUG=gctrace=1
}

type sample struct {
	At    time.Duration // since Started
	Bytes int64
	File  int64 // of Bytes, pages mapped from files: the binary's
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
	args := append([]string{
		"--gateway", gatewayNS + "/" + gatewayName,
		"--publish-service", gatewayNS + "/kong-proxy",
		"--log-level", "info",
	}, extra...)
	p := &proc{}
	take := func(line string) bool {
		if !strings.HasPrefix(line, "gc ") {
			return false
		}
		p.mu.Lock()
		p.gc = append(p.gc, gcLine(time.Since(p.Started), line))
		p.mu.Unlock()
		return true
	}
	p.Process = harness.StartWithForTest(t, harness.Options{Env: env, Take: take}, b.konglet, b.env.Kubeconfig, kong.URL(), args...)
	go p.sampleRSS()
	return p
}

func (p *proc) sampleRSS() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; !p.Exited(); <-tick.C {
		if v, file, ok := rssOf(p.Pid()); ok {
			p.mu.Lock()
			p.rss = append(p.rss, sample{At: time.Since(p.Started), Bytes: v, File: file})
			p.mu.Unlock()
		}
	}
}

// vmRSS reads VmRSS of a process from /proc.
func vmRSS(pid int) (int64, bool) {
	rss, _, ok := rssOf(pid)
	return rss, ok
}

// rssOf reads VmRSS and RssFile of a process from /proc.
func rssOf(pid int) (rss, file int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	kib := func(rest string) int64 {
		f := strings.Fields(rest)
		if len(f) == 0 {
			return -1
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return v * 1024
	}
	rss, file = -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			rss = kib(rest)
		} else if rest, found := strings.CutPrefix(line, "RssFile:"); found {
			file = kib(rest)
		}
	}
	return rss, file, rss >= 0 && file >= 0
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

// MaxAnonRSS is the largest sample so far of the RSS not mapped from files:
// what konglet allocates, without the binary's pages, which konglet
// releases when idle and so come and go with its timing.
func (p *proc) MaxAnonRSS() int64 {
	var m int64
	for _, s := range p.RSS() {
		m = max(m, s.Bytes-s.File)
	}
	return m
}

// LogsContaining returns the log lines that contain s.
func (p *proc) LogsContaining(s string) []string {
	var out []string
	for _, l := range strings.Split(p.Logs(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// scrape reads /metrics as name{labels} -> value.
func (p *proc) scrape() (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.Metrics() + "/metrics")
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

// logTime is when konglet first logged msg, since its start.
func (p *proc) logTime(msg string) (time.Duration, bool) {
	for _, l := range p.LogsContaining(`"msg":"` + msg + `"`) {
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
