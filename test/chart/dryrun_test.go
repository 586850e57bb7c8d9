package chart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/konglet/konglet/test/harness"
)

// install does what docs/install.md does before and with `helm install`:
// the namespace and deploy/rbac/ for real, then every object the chart
// renders as a server-side dry run with strict field validation (a field
// the API does not know, e.g. a misspelt one in the sidecar, is an error).
// The Deployment is created for real, so that the readiness gate patch can
// be applied to it the way `kubectl patch` does; the Pod its template makes
// (with the gate) is dry-run too and returned as the API server stored it.
func install(t *testing.T, r *rendering) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube.Discovery()))
	resource := func(u *unstructured.Unstructured) dynamic.ResourceInterface {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			// Every kind the chart renders with these values is built in;
			// a CRD-backed one (ServiceMonitor...) would need its CRD here.
			t.Fatalf("the API server does not serve %s: %v", gvk, err)
		}
		if m.Scope.Name() != "namespace" {
			return dyn.Resource(m.Resource)
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace) // helm install --namespace
		}
		return dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}

	files, err := filepath.Glob(filepath.Join(repo, "deploy", "rbac", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/rbac/*.yaml (%v)", err)
	}
	for _, f := range files {
		for _, u := range readObjects(t, f) {
			if _, err := resource(u).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %s %s: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
		}
	}

	for _, u := range r.objects {
		opts := metav1.CreateOptions{FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll}}
		if u.GetKind() == "Deployment" {
			opts.DryRun = nil
		}
		if _, err := resource(u).Create(ctx, u, opts); err != nil {
			t.Fatalf("the API server refuses the rendered %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	deployments := env.Kube.AppsV1().Deployments(namespace)
	name := r.deployment.Name
	t.Cleanup(func() {
		// No controller manager: nothing holds the Deployment back, and the
		// next variant creates its own under the same name.
		_ = deployments.Delete(context.Background(), name, metav1.DeleteOptions{})
		if err := harness.Poll(30*time.Second, 50*time.Millisecond, func() error {
			if _, err := deployments.Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment %s still there after its deletion (get: %v)", name, err)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})

	patchYAML, err := os.ReadFile(filepath.Join(repo, "deploy", "helm", "readiness-gate-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := sigsyaml.YAMLToJSON(patchYAML)
	if err != nil {
		t.Fatal(err)
	}
	// kubectl patch --patch-file: a strategic merge patch, sent as is.
	patched, err := deployments.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("readiness-gate-patch.yaml does not apply to the rendered Deployment: %v", err)
	}
	pod := &corev1.Pod{ObjectMeta: *patched.Spec.Template.ObjectMeta.DeepCopy(), Spec: patched.Spec.Template.Spec}
	pod.Name, pod.Namespace = name+"-0", namespace
	created, err := env.Kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("the API server refuses the Pod of the patched Deployment: %v", err)
	}
	return created
}

// readObjects reads every object of a multi-document YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	d := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
