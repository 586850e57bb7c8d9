package chart

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/konglet/konglet/sync/status"
)

// The values files users install with, in docs/install.md's order: the base
// file, then at most one variant on top of it.
var variants = []struct {
	name  string
	files []string
	// check asserts what the variant adds.
	check func(t *testing.T, r *rendering, pod *corev1.Pod)
}{
	{name: "values.yaml", files: []string{"deploy/helm/values.yaml"}},
	{name: "stream listens", files: []string{"deploy/helm/values.yaml", "deploy/helm/values-stream.yaml"}, check: checkStream},
	{name: "Linkerd", files: []string{"deploy/helm/values.yaml", "deploy/helm/values-linkerd.yaml"}, check: checkLinkerd},
	{name: "replicas and PodDisruptionBudget", files: []string{"deploy/helm/values.yaml", "deploy/helm/values-ha.yaml"}, check: checkHA},
}

// TestChart renders the real Kong chart with each values file, installs
// the result on the test API server (RBAC for real, the rendered objects as
// dry runs, the readiness gate patch on the rendered Deployment) and checks
// the properties konglet relies on in what the API server accepted.
func TestChart(t *testing.T) {
	needChart(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := render(t, v.files...)
			pod := install(t, r)
			checkPod(t, r, pod)
			if v.check != nil {
				v.check(t, r, pod)
			}
		})
	}
}

// The konglet container's user: the image's (65532, see test/tools/image).
const imageUser = 65532

func checkPod(t *testing.T, r *rendering, pod *corev1.Pod) {
	t.Helper()
	spec := pod.Spec
	kong := r.container(t, "proxy")
	k := r.container(t, "konglet")
	flags := flagValues(k.Args)

	t.Run("konglet is a sidecar of Kong", func(t *testing.T) {
		var names []string
		for _, c := range spec.Containers {
			names = append(names, c.Name)
		}
		if slices.Sort(names); !slices.Equal(names, []string{"konglet", "proxy"}) {
			t.Errorf("containers %v, want Kong (proxy) and konglet: the chart's controller container must be off", names)
		}
		for _, u := range r.objects {
			switch u.GetKind() {
			case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "IngressClass":
				t.Errorf("the chart renders %s %s: konglet's account and RBAC come from deploy/rbac/ only", u.GetKind(), u.GetName())
			}
		}
		if len(k.Args) == 0 || k.Args[0] != "run" {
			t.Errorf("konglet's args %v: want the run command first", k.Args)
		}
	})

	t.Run("probes", func(t *testing.T) {
		listen := cmp.Or(flags["listen"], ":9542") // konglet's default
		_, port, _ := strings.Cut(listen, ":")
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
			if got := containerPort(k, p.probe.HTTPGet.Port); strconv.Itoa(got) != port {
				t.Errorf("%s probe on port %s (%d); konglet listens on %s", p.what, p.probe.HTTPGet.Port.String(), got, listen)
			}
		}
		if kong.ReadinessProbe == nil || kong.ReadinessProbe.HTTPGet == nil || kong.ReadinessProbe.HTTPGet.Path != "/status/ready" {
			t.Errorf("Kong's readiness probe is %+v, want /status/ready (ready once it holds a configuration)", kong.ReadinessProbe)
		}
	})

	t.Run("resources", func(t *testing.T) {
		res := k.Resources
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := res.Requests[name]; !ok || q.IsZero() {
				t.Errorf("konglet requests no %s", name)
			}
		}
		if q, ok := res.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
			t.Error("konglet has no memory limit")
		}
		// Throttling would delay configuration pushes.
		if _, ok := res.Limits[corev1.ResourceCPU]; ok {
			t.Error("konglet has a CPU limit")
		}
	})

	t.Run("security context", func(t *testing.T) {
		sc := k.SecurityContext
		if sc == nil {
			t.Fatal("konglet has no securityContext")
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Error("runAsNonRoot is not true")
		}
		if sc.RunAsUser == nil || *sc.RunAsUser != imageUser {
			t.Errorf("runAsUser %v, want the image's user %d", sc.RunAsUser, imageUser)
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
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
		}
	})

	t.Run("API token only in konglet", func(t *testing.T) {
		const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("automountServiceAccountToken is %v at Pod level, want false", spec.AutomountServiceAccountToken)
		}
		tokens := map[string]corev1.Volume{}
		for _, vol := range spec.Volumes {
			if vol.Secret != nil {
				t.Errorf("volume %s mounts a Secret: no Secret belongs in the Kong Pod", vol.Name)
			}
			if vol.Projected == nil {
				continue
			}
			for _, s := range vol.Projected.Sources {
				if s.ServiceAccountToken != nil || s.Secret != nil {
					tokens[vol.Name] = vol
				}
			}
		}
		// The chart renders a "<account>-token" volume for its controller
		// container; a volume nobody mounts gives no container anything.
		mounted := map[string]bool{}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			for _, m := range c.VolumeMounts {
				_, isToken := tokens[m.Name]
				if (isToken || strings.HasPrefix(m.MountPath, tokenDir)) && c.Name != "konglet" {
					t.Errorf("container %s mounts %s at %s: only konglet may hold API credentials", c.Name, m.Name, m.MountPath)
				}
				if isToken && c.Name == "konglet" {
					mounted[m.Name] = true
					if m.MountPath != tokenDir || !m.ReadOnly {
						t.Errorf("konglet mounts the token at %s (read-only %t); client-go reads it read-only at %s", m.MountPath, m.ReadOnly, tokenDir)
					}
					checkTokenVolume(t, tokens[m.Name])
				}
			}
		}
		if len(mounted) != 1 {
			t.Errorf("konglet mounts %d token volumes, want 1", len(mounted))
		}
		if len(kong.EnvFrom) > 0 {
			t.Errorf("Kong takes variables from %v: nothing outside the values belongs in its environment", kong.EnvFrom)
		}
	})

	t.Run("admin API on localhost only", func(t *testing.T) {
		listen, _ := envOf(kong, "KONG_ADMIN_LISTEN")
		entries := listens(listen)
		if len(entries) == 0 {
			t.Fatalf("KONG_ADMIN_LISTEN is %q: no admin listen for konglet", listen)
		}
		var ports []int
		for _, e := range entries {
			if e.host != "127.0.0.1" && e.host != "[::1]" {
				t.Errorf("Kong's admin API listens on %s: want loopback only", e.addr)
			}
			if slices.Contains(e.params, "ssl") {
				t.Errorf("admin listen %s has ssl; konglet talks plain HTTP on loopback", e.addr)
			}
			ports = append(ports, e.port)
		}
		u := cmp.Or(flags["kong-admin-url"], "http://localhost:8001") // konglet's default
		if !strings.HasPrefix(u, "http://localhost:") || !slices.Contains(ports, atoi(strings.TrimPrefix(u, "http://localhost:"))) {
			t.Errorf("--kong-admin-url %s is not one of Kong's admin listens %q", u, listen)
		}
		for _, svc := range r.services {
			for _, sp := range svc.Spec.Ports {
				if slices.Contains(ports, targetPort(kong, sp)) {
					t.Errorf("Service %s port %d reaches the admin API", svc.Name, sp.Port)
				}
			}
		}
	})

	t.Run("Kong's mode", func(t *testing.T) {
		for name, want := range map[string]string{"KONG_DATABASE": "off", "KONG_ROUTER_FLAVOR": "expressions"} {
			if got, _ := envOf(kong, name); got != want {
				t.Errorf("%s=%q, want %q", name, got, want)
			}
		}
	})

	t.Run("port_maps covers the proxy Service", func(t *testing.T) {
		sel := r.selecting()
		if len(sel) != 1 {
			t.Fatalf("%d Services select the Kong Pods, want the proxy Service alone", len(sel))
		}
		svc := sel[0]
		if want := "$(POD_NAMESPACE)/" + svc.Name; flags["publish-service"] != want {
			t.Errorf("--publish-service=%s, want %s: the Service the chart renders", flags["publish-service"], want)
		}
		pm, _ := envOf(kong, "KONG_PORT_MAPS")
		maps := map[int]int{}
		for _, e := range strings.Split(pm, ",") {
			host, container, _ := strings.Cut(strings.TrimSpace(e), ":")
			maps[atoi(host)] = atoi(container)
		}
		proxyListen, _ := envOf(kong, "KONG_PROXY_LISTEN")
		streamListen, _ := envOf(kong, "KONG_STREAM_LISTEN")
		kongPorts := map[int]bool{}
		for _, e := range append(listens(proxyListen), listens(streamListen)...) {
			kongPorts[e.port] = true
		}
		for _, sp := range svc.Spec.Ports {
			target := targetPort(kong, sp)
			if !kongPorts[target] {
				t.Errorf("Service port %d leads to %d, where Kong does not listen (proxy %q, stream %q)", sp.Port, target, proxyListen, streamListen)
			}
			// Kong sees a connection's port as port_maps maps it, else as
			// the listen's own port; either way it must be the Service
			// port a Gateway listener names.
			if mapped, ok := maps[int(sp.Port)]; ok && mapped != target || !ok && int(sp.Port) != target {
				t.Errorf("Service port %d -> %d is not in KONG_PORT_MAPS %q", sp.Port, target, pm)
			}
		}
	})

	t.Run("readiness gate", func(t *testing.T) {
		if !slices.ContainsFunc(spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == status.PodConditionType }) {
			t.Errorf("readiness gates %v: want %s, the condition konglet writes", spec.ReadinessGates, status.PodConditionType)
		}
	})

	t.Run("scraped", func(t *testing.T) {
		a := pod.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("scrape annotations %v, want scrape true on /metrics", a)
		}
		if p := atoi(a["prometheus.io/port"]); p == 0 || containerPort(k, intstr.FromString("konglet")) != p {
			t.Errorf("prometheus.io/port %q is not konglet's port", a["prometheus.io/port"])
		}
		var pm struct {
			Metadata struct{ Namespace string }
			Spec     struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				}
				PodMetricsEndpoints []struct{ Port, Path string } `json:"podMetricsEndpoints"`
			}
		}
		b, err := os.ReadFile(filepath.Join(repo, "deploy", "prometheus", "podmonitor.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &pm); err != nil {
			t.Fatal(err)
		}
		if pm.Metadata.Namespace != pod.Namespace || len(pm.Spec.Selector.MatchLabels) == 0 || !matches(pm.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("the PodMonitor (namespace %s, labels %v) does not select the Pod (namespace %s, labels %v)",
				pm.Metadata.Namespace, pm.Spec.Selector.MatchLabels, pod.Namespace, pod.Labels)
		}
		for _, e := range pm.Spec.PodMetricsEndpoints {
			if containerPort(k, intstr.FromString(e.Port)) < 0 || e.Path != "/metrics" {
				t.Errorf("the PodMonitor scrapes port %q path %s, not konglet's /metrics", e.Port, e.Path)
			}
		}
	})
}

// checkTokenVolume: the projected volume gives client-go's in-cluster
// config what it reads.
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
		if s.DownwardAPI != nil {
			for _, it := range s.DownwardAPI.Items {
				paths[it.Path] = true
			}
		}
	}
	for _, p := range []string{"token", "ca.crt", "namespace"} {
		if !paths[p] {
			t.Errorf("volume %s has no %s", vol.Name, p)
		}
	}
}

// listen is one entry of a Kong *_listen property.
type listen struct {
	addr, host string
	port       int
	params     []string
}

// listens parses "127.0.0.1:8001, [::1]:8001 ssl" ("off" is none).
func listens(v string) []listen {
	var out []listen
	for _, e := range strings.Split(v, ",") {
		f := strings.Fields(e)
		if len(f) == 0 || f[0] == "off" {
			continue
		}
		i := strings.LastIndex(f[0], ":")
		out = append(out, listen{addr: f[0], host: f[0][:max(i, 0)], port: atoi(f[0][i+1:]), params: f[1:]})
	}
	return out
}

// targetPort is the container port a Service port leads to (-1 if none).
func targetPort(c corev1.Container, sp corev1.ServicePort) int {
	if sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == 0 {
		return int(sp.Port)
	}
	return containerPort(c, sp.TargetPort)
}

// containerPort resolves a port (number or name) in the container; -1 if
// the name is not there.
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

// flagValues maps --name=value arguments (the form the values use).
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		if name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "="); ok && strings.HasPrefix(a, "--") {
			out[name] = value
		}
	}
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// checkStream: TCP, TLS and UDP stream listens of the kinds konglet needs
// for TCPRoute, TLSRoute and UDPRoute listeners, each a port of the proxy
// Service (checkPod: port_maps and targets).
func checkStream(t *testing.T, r *rendering, pod *corev1.Pod) {
	kong := r.container(t, "proxy")
	v, _ := envOf(kong, "KONG_STREAM_LISTEN")
	got := map[int][]string{}
	for _, l := range listens(v) {
		got[l.port] = l.params
	}
	for port, want := range map[int]string{9000: "", 9443: "ssl", 9053: "udp"} {
		params, ok := got[port]
		if !ok || want != "" && !slices.Contains(params, want) || want == "" && len(params) > 0 {
			t.Errorf("KONG_STREAM_LISTEN %q: want port %d with %q", v, port, want)
		}
	}
	svc := r.selecting()[0]
	var ports []string
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, string(sp.Protocol)+"/"+strconv.Itoa(int(sp.Port)))
	}
	slices.Sort(ports)
	if want := []string{"TCP/443", "TCP/80", "TCP/9000", "TCP/9443", "UDP/9053"}; !slices.Equal(ports, want) {
		t.Errorf("the proxy Service has ports %v, want %v", ports, want)
	}
}

// checkLinkerd: the Pod is injected, waits for the proxy, and the proxy
// outlives Kong's drain within the grace period; the scrape annotations
// are still there (podAnnotations merge).
func checkLinkerd(t *testing.T, r *rendering, pod *corev1.Pod) {
	a := pod.Annotations
	if a["linkerd.io/inject"] != "enabled" || a["config.linkerd.io/proxy-await"] != "enabled" {
		t.Errorf("annotations %v: want linkerd.io/inject and proxy-await enabled", a)
	}
	wait := atoi(a["config.alpha.linkerd.io/proxy-wait-before-exit-seconds"])
	grace := pod.Spec.TerminationGracePeriodSeconds
	if wait == 0 || grace == nil || int64(wait) >= *grace {
		t.Errorf("proxy-wait-before-exit-seconds %d, terminationGracePeriodSeconds %v: want the wait within the grace period", wait, grace)
	}
	if drain := r.container(t, "proxy").Lifecycle; drain == nil || drain.PreStop == nil || drain.PreStop.Exec == nil ||
		!slices.Contains(drain.PreStop.Exec.Command, "--wait=15") || wait <= 15 {
		t.Errorf("Kong's preStop %+v: want kong quit --wait=15, shorter than the proxy's wait (%d s)", drain, wait)
	}
}

// checkHA: three replicas and a PodDisruptionBudget that selects exactly
// the Kong Pods and lets one go at a time.
func checkHA(t *testing.T, r *rendering, pod *corev1.Pod) {
	if n := r.deployment.Spec.Replicas; n == nil || *n != 3 {
		t.Errorf("replicas %v, want 3", n)
	}
	if len(r.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(r.pdbs))
	}
	pdb := r.pdbs[0]
	if pdb.Spec.Selector == nil || len(pdb.Spec.Selector.MatchExpressions) > 0 || !matches(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the Pod (labels %v)", pdb.Spec.Selector, pod.Labels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("maxUnavailable %v, minAvailable %v: want maxUnavailable 1", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.LabelSelector == nil || !matches(c.LabelSelector.MatchLabels, pod.Labels) {
			t.Errorf("topology spread constraint %s does not select the Pod", c.TopologyKey)
		}
	}
	if len(pod.Spec.TopologySpreadConstraints) == 0 {
		t.Error("no topology spread constraint")
	}
}
