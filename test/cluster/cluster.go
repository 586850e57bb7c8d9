// Package cluster starts a real kube-apiserver and etcd, built from Go
// modules into the repository's .bin folder on first use, with the Gateway
// API CRDs installed. Tests talk to it like to any cluster.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// Cluster is a running API server.
type Cluster struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	GW     gwclient.Interface
	env    *envtest.Environment
	// Kubeconfig is a file that konglet processes can use.
	Kubeconfig string
}

// root is the repository root, found from this file's location.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var buildOnce sync.Once
var buildErr error

// BinDir returns the folder with kube-apiserver and etcd, building them
// first if they are missing (about 4 minutes cold, cached afterwards).
func BinDir() (string, error) {
	dir := filepath.Join(root(), ".bin")
	buildOnce.Do(func() {
		for _, tool := range []struct{ name, ldflags string }{
			{"etcd", ""},
			{"kube-apiserver", "-X k8s.io/component-base/version.gitVersion=v1.37.2"},
		} {
			out := filepath.Join(dir, tool.name)
			if _, err := os.Stat(out); err == nil {
				continue
			}
			cmd := exec.Command("go", "build", "-ldflags", tool.ldflags, "-o", out, ".")
			cmd.Dir = filepath.Join(root(), "test", "tools", tool.name)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", tool.name, err, b)
				return
			}
		}
	})
	return dir, buildErr
}

// CRDDir is the folder of the standard Gateway API CRDs in the module cache.
func CRDDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", fmt.Errorf("locating the gateway-api module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard"), nil
}

// Start starts an API server with the Gateway API CRDs.
func Start() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	crds, err := CRDDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              []string{crds},
			ErrorIfPathMissing: true,
		},
	}
	// Namespaces are never emptied here (no controller manager): room for
	// the Services of tests run again in one process (-count), beyond
	// envtest's 256 addresses.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	c := &Cluster{Config: cfg, env: env}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.GW, err = gwclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = writeKubeconfig(env); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop stops the API server and etcd.
func (c *Cluster) Stop() error {
	if c.Kubeconfig != "" {
		_ = os.Remove(c.Kubeconfig)
	}
	return c.env.Stop()
}

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "konglet-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "konglet-kubeconfig-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(b)
	return f.Name(), err
}
