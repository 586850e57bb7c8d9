// Package e2e runs konglet as a real process against a real kube-apiserver
// and a strict Kong admin API double, and checks what Kong would route and
// what the API server shows.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/konglet/konglet/test/cluster"
	"github.com/konglet/konglet/test/harness"
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

// startKonglet runs konglet against the test cluster and the given Kong
// double; it is stopped when the test ends.
func startKonglet(t *testing.T, kong *kongdouble.Double, args ...string) *process {
	t.Helper()
	return harness.StartForTest(t, konglet, env.Kubeconfig, kong.URL(), args...)
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	harness.Eventually(t, timeout, what, check)
}
