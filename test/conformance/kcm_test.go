package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/konglet/konglet/test/cluster"
)

// repoRoot is the repository root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// controllerManagerBinary returns .bin/kube-controller-manager, building it
// from test/tools/kube-controller-manager when missing (about 75 s more than
// the kube-apiserver, cached after).
func controllerManagerBinary() (string, error) {
	dir, err := cluster.BinDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "kube-controller-manager")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cmd := exec.Command("go", "build", "-ldflags", "-X k8s.io/component-base/version.gitVersion=v1.37.2", "-o", out, ".")
	cmd.Dir = filepath.Join(repoRoot(), "test", "tools", "kube-controller-manager")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kube-controller-manager: %v\n%s", err, b)
	}
	return out, nil
}

// controllers are the kube-controller-manager controllers the suite's
// manifests need: Deployments become ReplicaSets and Pods, Services get
// EndpointSlices, namespaces get their default ServiceAccount (Pods are
// refused without it) and are finalized when deleted, owned objects are
// collected.
const controllers = "deployment,replicaset,endpointslice,serviceaccount,namespace,garbagecollector"

// startControllerManager runs kube-controller-manager against the test API
// server, on loopback, without leader election; stop ends it.
func startControllerManager(kubeconfig, logFile string) (stop func(), err error) {
	bin, err := controllerManagerBinary()
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig", kubeconfig,
		"--controllers", controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--concurrent-service-endpoint-syncs=10", "--concurrent-namespace-syncs=5",
		"--endpointslice-updates-batch-period=0s",
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		logs.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logs.Close()
	}, nil
}
