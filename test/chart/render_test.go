package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Names of docs/install.md: release "kong" in namespace "kong".
const release, namespace = "kong", "kong"

// rendering is what `helm install kong kong/kong --namespace kong
// --skip-crds -f FILES...` creates, one object per document.
type rendering struct {
	docs       map[string]string // the YAML of each object, by "Kind/name"
	objects    []*unstructured.Unstructured
	deployment *appsv1.Deployment
	services   []*corev1.Service
	pdbs       []*policyv1.PodDisruptionBudget
}

// render renders the chart with the values files (paths relative to the
// repository) with the Helm SDK, as `helm install` would against the test
// API server: its version and API groups are the chart's Capabilities.
func render(t *testing.T, files ...string) *rendering {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if chrt.Metadata.Version != chartVersion {
		t.Fatalf("the chart at %s is version %s; the values are checked against %s", chartDir, chrt.Metadata.Version, chartVersion)
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(repo, f)
	}
	vals, err := (&values.Options{ValueFiles: paths}).MergeValues(getter.Providers{})
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly, inst.DryRun = true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	inst.SkipCRDs = true
	inst.KubeVersion, inst.APIVersions = capabilities(t)
	rel, err := inst.Run(chrt, vals)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", files, err)
	}
	// Hooks would be created by `helm install` too; the chart's only ones
	// are its `helm test` Pods, which an install does not create.
	for _, h := range rel.Hooks {
		if !strings.HasPrefix(h.Path, chrt.Name()+"/templates/tests/") {
			t.Fatalf("the chart renders the hook %s, which this test does not check", h.Path)
		}
	}
	r := &rendering{docs: map[string]string{}}
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("a rendered document is not YAML: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		key := u.GetKind() + "/" + u.GetName()
		if _, dup := r.docs[key]; dup {
			t.Fatalf("the chart renders %s twice", key)
		}
		r.docs[key] = doc
		r.objects = append(r.objects, &u)
		switch u.GetKind() {
		case "Deployment":
			if r.deployment != nil {
				t.Fatalf("the chart renders two Deployments")
			}
			r.deployment = &appsv1.Deployment{}
			decodeStrict(t, doc, r.deployment)
		case "Service":
			svc := &corev1.Service{}
			decodeStrict(t, doc, svc)
			r.services = append(r.services, svc)
		case "PodDisruptionBudget":
			pdb := &policyv1.PodDisruptionBudget{}
			decodeStrict(t, doc, pdb)
			r.pdbs = append(r.pdbs, pdb)
		}
	}
	if r.deployment == nil {
		t.Fatalf("the chart renders no Deployment with %v", files)
	}
	return r
}

// decodeStrict decodes YAML into v, refusing fields v does not have.
func decodeStrict(t *testing.T, doc string, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
		t.Fatalf("decoding a rendered object: %v", err)
	}
}

// capabilities are the test API server's version and API groups, in the
// form Helm gathers them from a cluster's discovery.
func capabilities(t *testing.T) (*chartutil.KubeVersion, chartutil.VersionSet) {
	t.Helper()
	v, err := env.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := env.Kube.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var set chartutil.VersionSet
	for _, l := range lists {
		set = append(set, l.GroupVersion)
		for _, r := range l.APIResources {
			set = append(set, l.GroupVersion+"/"+r.Kind)
		}
	}
	return &chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor}, set
}

// container is the named container of the Pod template.
func (r *rendering) container(t *testing.T, name string) corev1.Container {
	t.Helper()
	for _, c := range r.deployment.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in the rendered Pod", name)
	return corev1.Container{}
}

// envOf is the value of a container's variable ("" and false if unset).
func envOf(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// selecting is every rendered Service whose selector matches the Pod.
func (r *rendering) selecting() []*corev1.Service {
	var out []*corev1.Service
	labels := r.deployment.Spec.Template.Labels
	for _, s := range r.services {
		if len(s.Spec.Selector) > 0 && matches(s.Spec.Selector, labels) {
			out = append(out, s)
		}
	}
	return out
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
