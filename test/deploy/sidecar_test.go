package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/konglet/konglet/sync/status"
)

// renderedDeployment is the Kong Deployment that chart 3.4.1 renders with
// deploy/helm/values.yaml: testdata/kong-deployment.yaml, which test/chart
// keeps equal to the chart's output (this module has no Helm SDK).
func renderedDeployment() (*appsv1.Deployment, error) {
	b, err := os.ReadFile(filepath.Join(repo, "test", "deploy", "testdata", "kong-deployment.yaml"))
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(b, d); err != nil {
		return nil, fmt.Errorf("testdata/kong-deployment.yaml: %w", err)
	}
	return d, nil
}

// TestSidecarSpecIsValid takes the Deployment users install (rendered by
// the Kong chart from deploy/helm/values.yaml), adds the readiness gate of
// deploy/helm/readiness-gate-patch.yaml the way docs/install.md says
// (kubectl patch: a strategic merge patch), and has the API server accept
// its Pod (server-side dry run) in the namespace deploy/rbac uses. konglet's
// arguments must be flags konglet has, for the account and the Gateway that
// deploy/rbac grants. The Pod's lock-down (security context, the API token
// in konglet only, the admin API on loopback, probes) is checked on the same
// rendering by test/chart, for every values variant.
func TestSidecarSpecIsValid(t *testing.T) {
	ctx := context.Background()
	rbac, err := loadRBAC()
	if err != nil {
		t.Fatal(err)
	}
	lay, err := layoutOf(rbac)
	if err != nil {
		t.Fatal(err)
	}
	ns := lay.PodNamespace
	deployment, err := renderedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if deployment.Namespace != ns {
		t.Errorf("the chart renders the Deployment in %s, deploy/rbac grants the Pods of %s", deployment.Namespace, ns)
	}
	deployment.Namespace = ns

	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("the API server refuses the Deployment: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AppsV1().Deployments(ns).Delete(context.Background(), deployment.Name, metav1.DeleteOptions{})
	})
	patchYAML, err := os.ReadFile(filepath.Join(repo, "deploy", "helm", "readiness-gate-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(patchYAML)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := env.Kube.AppsV1().Deployments(ns).Patch(ctx, deployment.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("readiness-gate-patch.yaml does not apply: %v", err)
	}

	pod := &corev1.Pod{ObjectMeta: patched.Spec.Template.ObjectMeta, Spec: patched.Spec.Template.Spec}
	pod.Name, pod.Namespace = "kong-kong-0", ns
	created, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the API server refuses the Pod: %v", err)
	}
	if _, err := env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run created the Pod (get: %v)", err)
	}
	spec := created.Spec

	// The readiness gate is konglet's condition.
	if !slices.ContainsFunc(spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == status.PodConditionType }) {
		t.Errorf("readiness gates %v: want %s, the condition konglet writes", spec.ReadinessGates, status.PodConditionType)
	}
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "konglet" })
	if i < 0 {
		t.Fatalf("no konglet container in %v", spec.Containers)
	}
	k := spec.Containers[i]
	flags := flagValues(k.Args)

	t.Run("arguments", func(t *testing.T) {
		// Every flag exists (a misspelt one would crash the sidecar at start).
		help, _ := exec.Command(konglet, "run", "-h").CombinedOutput()
		for name := range flags {
			if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`).Match(help) {
				t.Errorf("konglet run has no flag --%s", name)
			}
		}
		if len(k.Args) == 0 || k.Args[0] != "run" {
			t.Errorf("args %v: want the run command first", k.Args)
		}
		// $(POD_NAMESPACE) in --publish-service expands from the container's env.
		for _, name := range []string{"POD_NAME", "POD_NAMESPACE"} {
			want := map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}[name]
			j := slices.IndexFunc(k.Env, func(e corev1.EnvVar) bool { return e.Name == name })
			if j < 0 || k.Env[j].ValueFrom == nil || k.Env[j].ValueFrom.FieldRef == nil || k.Env[j].ValueFrom.FieldRef.FieldPath != want {
				t.Errorf("konglet's env has no %s from %s", name, want)
			}
		}
		// The Pod runs as the account deploy/rbac grants, for the Gateway it grants.
		if spec.ServiceAccountName != lay.ServiceAccount.Name {
			t.Errorf("serviceAccountName %q, deploy/rbac grants %s", spec.ServiceAccountName, lay.ServiceAccount)
		}
		if flags["gateway"] != lay.Gateway.String() {
			t.Errorf("--gateway=%s, deploy/rbac grants the Gateway %s", flags["gateway"], lay.Gateway)
		}
	})
}

// flagValues maps --name=value (or --name value) arguments.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
			i++
		}
		out[name] = value
	}
	return out
}
