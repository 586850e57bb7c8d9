package chart

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite test/deploy/testdata/kong-deployment.yaml from the chart")

// deploymentFile is the Kong Deployment the chart renders with
// deploy/helm/values.yaml, which test/deploy's tests run against (that
// module has no Helm SDK; this test keeps the copy equal to the chart's
// output).
var deploymentFile = filepath.Join("test", "deploy", "testdata", "kong-deployment.yaml")

const deploymentHeader = "# The Deployment that Kong chart " + chartVersion + " renders with deploy/helm/values.yaml\n" +
	"# (release kong, namespace kong). Generated: cd test/chart && go test -run TestDeploymentCopy -update\n"

// TestDeploymentCopy: test/deploy's copy of the rendered Deployment is
// what the chart renders now.
func TestDeploymentCopy(t *testing.T) {
	needChart(t)
	r := render(t, "deploy/helm/values.yaml")
	want := deploymentHeader + r.docs["Deployment/"+r.deployment.Name]
	path := filepath.Join(repo, deploymentFile)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the chart renders with deploy/helm/values.yaml; regenerate it: cd test/chart && go test -run TestDeploymentCopy -update", deploymentFile)
	}
}
