package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/konglet/konglet/test/cluster"
)

var (
	// repo is the repository root (deploy/, docs/).
	repo string
	// chartDir is the Kong chart; "" when it is not there (the tests skip).
	chartDir string
	env      *cluster.Cluster
)

// chartVersion is the Kong chart version the values are rendered against
// (docs/install.md and the head of deploy/helm/values.yaml say the same).
const chartVersion = "3.4.1"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Join(filepath.Dir(file), "..", "..")
	// The chart sits beside the repository (../shared/charts/kong from the
	// root of a clone or of a worktree next to it); KONG_CHART overrides.
	dir := os.Getenv("KONG_CHART")
	if dir == "" {
		dir = filepath.Join(repo, "..", "shared", "charts", "kong")
	}
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		fmt.Fprintf(os.Stderr, "no Kong chart at %s (set KONG_CHART to the chart's folder): the chart tests skip\n", dir)
		return m.Run()
	}
	chartDir = dir
	var err error
	if env, err = cluster.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}

// needChart skips a test when the chart is absent, saying where it was looked for.
func needChart(t *testing.T) {
	t.Helper()
	if chartDir == "" {
		t.Skip("the Kong chart is not beside the repository (../shared/charts/kong) and KONG_CHART is not set")
	}
}
