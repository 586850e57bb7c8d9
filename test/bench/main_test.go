//go:build bench

// Package bench measures konglet, run as a real process against a real
// kube-apiserver and the Kong admin API double: translation cost,
// propagation latency, coalescing of bursts, memory, cold start and status
// writes. It is not part of `go test ./...` (build tag bench):
//
//	go test -tags bench -run '^TestBench$' -count=1 -timeout 30m -v ./test/bench
//
// It writes results/RESULTS.md and results/raw.json next to this file.
// KONGLET_BENCH=memory,coldstart10k (names of the t.Run steps) runs only
// those, writing their results under $TMPDIR/konglet-bench-results-<pid>
// instead (several worktrees may bench one after the other).
package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/konglet/konglet/test/cluster"
	"github.com/konglet/konglet/test/harness"
)

// bencher holds what every scenario shares.
type bencher struct {
	ctx     context.Context
	env     *cluster.Cluster
	c       clients
	konglet string
	tmp     string
	results *results
	apps    int      // applications created so far: [0, apps)
	hosts   []string // the current hostname of each application's route
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// only is the KONGLET_BENCH selection of scenarios; empty runs them all.
var only = os.Getenv("KONGLET_BENCH")

func resultsDir() string {
	if only != "" {
		return filepath.Join(os.TempDir(), "konglet-bench-results-"+strconv.Itoa(os.Getpid()))
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "results")
}

// step runs one scenario unless KONGLET_BENCH leaves it out, then saves the
// results so far.
func (b *bencher) step(t *testing.T, name string, scenario func(*testing.T)) {
	if only != "" && !slices.Contains(strings.Split(only, ","), name) {
		return
	}
	t.Run(name, scenario)
	b.results.checkpoint(resultsDir())
}

func TestBench(t *testing.T) {
	start := time.Now()
	b := &bencher{ctx: context.Background(), results: newResults()}
	if err := os.MkdirAll(resultsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.results.Duration = time.Since(start).Round(time.Second).String()
		b.results.LoadAvgEnd = loadAvg()
		b.results.Env.ReferenceEnd = referenceWork().String()
		if err := b.results.write(resultsDir()); err != nil {
			t.Error(err)
		}
		t.Logf("results in %s", resultsDir())
	}()
	tmp, err := os.MkdirTemp("", "konglet-bench-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	b.tmp = tmp

	// 1. Translation first, while no API server competes for the CPU.
	b.step(t, "translation", b.translation)

	if b.konglet, err = harness.Build(tmp, false); err != nil {
		t.Fatal(err)
	}
	clusterStart := time.Now()
	if b.env, err = cluster.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.env.Stop()
	b.results.Env.ClusterStart = time.Since(clusterStart).Round(time.Millisecond).String()
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	b.c.kube = kubernetes.NewForConfigOrDie(cfg)
	b.c.gw = gwclient.NewForConfigOrDie(cfg)
	if err := b.c.base(b.ctx); err != nil {
		t.Fatal(err)
	}

	b.step(t, "baseline", b.baseline)
	b.step(t, "statuswrites", func(t *testing.T) { b.statusWrites(t, 1) })
	b.step(t, "statuswrites3", func(t *testing.T) { b.statusWrites(t, 3) })
	b.step(t, "coldstart1k", func(t *testing.T) { b.coldStart(t, 1_000, time.Second) })
	// Before the large scenarios: twenty Kong doubles in this process
	// load their first configuration at once, which timed out (10 s) when
	// the fleet ran after the memory and 10k scenarios (cause not found).
	b.step(t, "fleet", b.fleetScale)
	b.step(t, "propagation_and_burst", b.propagationAndBurst)
	b.step(t, "secrets", b.unrelatedSecrets)
	b.step(t, "memory", b.memory)
	b.step(t, "coldstart10k", func(t *testing.T) { b.coldStart(t, 10_000, 5*time.Second) })
}

// ensureApps creates applications (Service, EndpointSlice, HTTPRoute)
// until there are n.
func (b *bencher) ensureApps(t *testing.T, n int) {
	t.Helper()
	if b.apps >= n {
		return
	}
	start := time.Now()
	if err := b.c.apps(b.ctx, b.apps, n); err != nil {
		t.Fatalf("creating applications %d to %d: %v", b.apps, n, err)
	}
	objects := (n - b.apps) * 3
	took := time.Since(start)
	t.Logf("created applications %d..%d (%d objects) in %v (%.0f objects/s)", b.apps, n-1, objects, took.Round(time.Millisecond), float64(objects)/took.Seconds())
	b.results.raw("creation", map[string]any{"from": b.apps, "to": n, "objects": objects, "seconds": took.Seconds()})
	for i := b.apps; i < n; i++ {
		b.hosts = append(b.hosts, host(i))
	}
	b.apps = n
}

// allRoutable tells whether Kong holds every application route so far,
// by the hostnames of the loaded document; the first and last are also
// checked with the double's router.
func (b *bencher) allRoutable(k *kong, n int) bool {
	if k.Loads() == 0 {
		return false
	}
	hosts := k.Hosts()
	for i := range n {
		if !hosts[b.hosts[i]] {
			return false
		}
	}
	return k.routes(b.hosts[0]) && k.routes(b.hosts[n-1])
}

// quiesce waits until konglet's status writes stop for quiet (at most
// timeout) and reports whether they did.
func quiesce(p *proc, quiet, timeout time.Duration) bool {
	last := -1.0
	since := time.Now()
	return poll(100*time.Millisecond, timeout, func() bool {
		w := p.metric("konglet_status_writes_total")
		if w != last {
			last, since = w, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	})
}

func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

func gitOutput(args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}
