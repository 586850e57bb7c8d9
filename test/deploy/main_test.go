// Package deploy tests the deployment material (deploy/rbac, deploy/helm,
// docs/metrics.md) against a real kube-apiserver and a konglet process:
// the RBAC is exactly what konglet needs, the sidecar spec of the Helm values
// is a valid and locked-down Pod, and the metric catalogue matches /metrics.
package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/konglet/konglet/test/cluster"
	"github.com/konglet/konglet/test/harness"
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
	var cleanup func()
	var err error
	if env, konglet, cleanup, err = harness.Setup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}

// process is one running konglet.
type process = harness.Process

// startProcess runs `konglet run` with the kubeconfig and Kong admin URL;
// it needs no *testing.T, so that runs can go on in goroutines.
func startProcess(kubeconfig, kongURL string, args ...string) (*process, error) {
	return harness.Start(konglet, kubeconfig, kongURL, args...)
}

// startKonglet is startProcess for a test: stopped when the test ends, its
// logs shown if the test failed, a data race a failure.
func startKonglet(t *testing.T, kubeconfig, kongURL string, args ...string) *process {
	t.Helper()
	return harness.StartForTest(t, konglet, kubeconfig, kongURL, args...)
}

// poll calls check every interval until it returns nil or the timeout passes.
func poll(timeout, interval time.Duration, check func() error) error {
	return harness.Poll(timeout, interval, check)
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	harness.Eventually(t, timeout, what, check)
}

func ptr[T any](v T) *T { return &v }
