package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/konglet/konglet/sync/status"
)

// helmValues is the part of deploy/helm/values.yaml that makes the Pod.
// The sidecar containers and volumes are decoded strictly (below): the
// chart copies them verbatim, so a misspelt field would be silently dropped.
type helmValues struct {
	Env            map[string]any            `json:"env"`
	PodAnnotations map[string]string         `json:"podAnnotations"`
	ReadinessProbe *corev1.Probe             `json:"readinessProbe"`
	ReplicaCount   *int32                    `json:"replicaCount"`
	UpdateStrategy appsv1.DeploymentStrategy `json:"updateStrategy"`
	Admin          struct {
		HTTP struct {
			ContainerPort int32 `json:"containerPort"`
		} `json:"http"`
	} `json:"admin"`
	Deployment struct {
		ServiceAccount struct {
			Create                       *bool  `json:"create"`
			Name                         string `json:"name"`
			AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
		} `json:"serviceAccount"`
		UserDefinedVolumes json.RawMessage `json:"userDefinedVolumes"`
		SidecarContainers  json.RawMessage `json:"sidecarContainers"`
	} `json:"deployment"`
}

// strict decodes JSON into v, refusing fields v does not have.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// TestSidecarSpecIsValid renders the Kong Pod that deploy/helm/values.yaml
// asks the chart for: konglet's sidecar container and volumes, the Pod-level
// settings the values set, a minimal Kong container, and the readiness gate
// of deploy/helm/readiness-gate-patch.yaml applied the way docs/install.md
// says (kubectl patch: a strategic merge patch of the Deployment). The API
// server must accept the Pod (server-side dry run), and the Pod must be
// locked down: konglet non-root with a read-only root filesystem and no
// capabilities, the API token only in konglet's container, no automatic
// token, probes on /healthz and /readyz.
func TestSidecarSpecIsValid(t *testing.T) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "helm", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v helmValues
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var sidecars []corev1.Container
	if err := strict(v.Deployment.SidecarContainers, &sidecars); err != nil {
		t.Fatalf("deployment.sidecarContainers is not a list of containers: %v", err)
	}
	var volumes []corev1.Volume
	if err := strict(v.Deployment.UserDefinedVolumes, &volumes); err != nil {
		t.Fatalf("deployment.userDefinedVolumes is not a list of volumes: %v", err)
	}
	ns := "kong" // docs/install.md: the release's namespace
	if rbac, err := loadRBAC(); err == nil {
		if lay, err := layoutOf(rbac); err == nil {
			ns = lay.PodNamespace
		}
	}

	// The Kong container, minimal: what the chart renders from the values
	// that concern it.
	kong := corev1.Container{
		Name:  "proxy",
		Image: "kong:3.9",
		Ports: []corev1.ContainerPort{
			{Name: "proxy", ContainerPort: 8000}, {Name: "proxy-tls", ContainerPort: 8443}, {Name: "status", ContainerPort: 8100},
		},
		Env:            []corev1.EnvVar{{Name: "KONG_ADMIN_LISTEN", Value: fmt.Sprintf("127.0.0.1:%d", v.Admin.HTTP.ContainerPort)}},
		ReadinessProbe: v.ReadinessProbe,
	}
	for _, k := range slices.Sorted(maps.Keys(v.Env)) {
		kong.Env = append(kong.Env, corev1.EnvVar{Name: "KONG_" + strings.ToUpper(k), Value: fmt.Sprint(v.Env[k])})
	}
	labels := map[string]string{"app.kubernetes.io/name": "kong", "app.kubernetes.io/instance": "kong"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kong-kong", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: v.ReplicaCount,
			Strategy: v.UpdateStrategy,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: v.PodAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName:           v.Deployment.ServiceAccount.Name,
					AutomountServiceAccountToken: v.Deployment.ServiceAccount.AutomountServiceAccountToken,
					Containers:                   append([]corev1.Container{kong}, sidecars...),
					Volumes:                      volumes,
				},
			},
		},
	}

	// The Deployment the chart would make, then the readiness gate patch, as
	// `kubectl patch deployment --patch-file` sends it.
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
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
	// No automatic token in any container.
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken is %v at Pod level, want false", spec.AutomountServiceAccountToken)
	}
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "konglet" })
	if i < 0 {
		t.Fatalf("no konglet container in %v", spec.Containers)
	}
	k := spec.Containers[i]

	t.Run("security context", func(t *testing.T) {
		sc := k.SecurityContext
		if sc == nil {
			t.Fatal("konglet has no securityContext")
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Error("runAsNonRoot is not true")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Error("runAsUser is 0")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Error("readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Error("allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Error("privileged")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("capabilities %+v: want drop ALL and add nothing", sc.Capabilities)
		}
	})

	t.Run("API token only in konglet", func(t *testing.T) {
		const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
		tokenVolumes := map[string]bool{}
		for _, vol := range spec.Volumes {
			if vol.Projected != nil {
				for _, s := range vol.Projected.Sources {
					if s.ServiceAccountToken != nil {
						tokenVolumes[vol.Name] = true
						checkTokenVolume(t, vol)
					}
				}
			}
			if vol.Secret != nil {
				t.Errorf("volume %s mounts a Secret: no Secret belongs in the Kong Pod", vol.Name)
			}
		}
		if len(tokenVolumes) != 1 {
			t.Fatalf("want one volume with a service account token, found %v", tokenVolumes)
		}
		all := append(slices.Clone(spec.InitContainers), spec.Containers...)
		for _, c := range all {
			for _, m := range c.VolumeMounts {
				holdsToken := tokenVolumes[m.Name] || strings.HasPrefix(m.MountPath, tokenDir)
				if holdsToken && c.Name != "konglet" {
					t.Errorf("container %s mounts %s at %s: only konglet may hold API credentials", c.Name, m.Name, m.MountPath)
				}
				if c.Name == "konglet" && tokenVolumes[m.Name] {
					if m.MountPath != tokenDir {
						t.Errorf("konglet mounts the token at %s; client-go's in-cluster config reads %s", m.MountPath, tokenDir)
					}
					if !m.ReadOnly {
						t.Errorf("the token mount is writable")
					}
				}
			}
		}
		if !slices.ContainsFunc(k.VolumeMounts, func(m corev1.VolumeMount) bool { return tokenVolumes[m.Name] }) {
			t.Error("konglet does not mount the token volume: it could not reach the API server")
		}
	})

	// The listen port, the container port, the probes and the scrape
	// annotation agree.
	flags := flagValues(k.Args)
	listen, ok := flags["listen"]
	if !ok {
		listen = ":9542" // konglet's default
	}
	_, portText, err := splitHostPort(listen)
	if err != nil {
		t.Fatalf("--listen=%s: %v", listen, err)
	}
	listenPort, _ := strconv.Atoi(portText)
	t.Run("probes", func(t *testing.T) {
		for _, p := range []struct {
			what  string
			probe *corev1.Probe
			path  string
		}{{"liveness", k.LivenessProbe, "/healthz"}, {"readiness", k.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("konglet has no HTTP %s probe", p.what)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s probe on %s, want %s", p.what, p.probe.HTTPGet.Path, p.path)
			}
			if port := containerPort(k, p.probe.HTTPGet.Port); port != listenPort {
				t.Errorf("%s probe on port %v (%d), but konglet listens on %d", p.what, p.probe.HTTPGet.Port.String(), port, listenPort)
			}
		}
		if a := created.Annotations["prometheus.io/port"]; a != "" && a != strconv.Itoa(listenPort) {
			t.Errorf("prometheus.io/port is %s, konglet listens on %d", a, listenPort)
		}
	})

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
		// konglet talks to the admin listen the values give Kong.
		if u, err := url.Parse(flags["kong-admin-url"]); err == nil && u.Port() != "" && u.Port() != strconv.Itoa(int(v.Admin.HTTP.ContainerPort)) {
			t.Errorf("--kong-admin-url %s, but admin.http.containerPort is %d", flags["kong-admin-url"], v.Admin.HTTP.ContainerPort)
		}
		// The Pod runs as the account deploy/rbac grants, for the Gateway it grants.
		rbac, err := loadRBAC()
		if err != nil {
			t.Fatal(err)
		}
		lay, err := layoutOf(rbac)
		if err != nil {
			t.Fatal(err)
		}
		if spec.ServiceAccountName != lay.ServiceAccount.Name {
			t.Errorf("serviceAccountName %q, deploy/rbac grants %s", spec.ServiceAccountName, lay.ServiceAccount)
		}
		if flags["gateway"] != lay.Gateway.String() {
			t.Errorf("--gateway=%s, deploy/rbac grants the Gateway %s", flags["gateway"], lay.Gateway)
		}
	})
}

// checkTokenVolume: the projected volume gives client-go's in-cluster
// config what it reads (token and ca.crt).
func checkTokenVolume(t *testing.T, vol corev1.Volume) {
	t.Helper()
	paths := map[string]bool{}
	for _, s := range vol.Projected.Sources {
		if s.ServiceAccountToken != nil {
			paths[s.ServiceAccountToken.Path] = true
		}
		if s.ConfigMap != nil {
			for _, it := range s.ConfigMap.Items {
				paths[it.Path] = true
			}
		}
	}
	for _, p := range []string{"token", "ca.crt"} {
		if !paths[p] {
			t.Errorf("volume %s has no %s", vol.Name, p)
		}
	}
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

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", "", fmt.Errorf("no port")
	}
	return s[:i], s[i+1:], nil
}

// containerPort resolves a probe's port (number or name) in the container.
func containerPort(c corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return -1
}
