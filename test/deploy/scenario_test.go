package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/status"
	"github.com/konglet/konglet/test/harness"
	"github.com/konglet/konglet/test/kongdouble"
)

// The named checks of the RBAC scenario, each tied to what it needs:
//
//	gatewayclass-status      GatewayClass Accepted written (gatewayclasses/status)
//	gateway-status           Gateway Accepted, Programmed (1 of 1 ready replicas) and listeners written (gateways/status, pods)
//	gateway-addresses        Gateway addresses = the publish Service's ClusterIP (services)
//	httproute-status         HTTPRoute statuses written (httproutes/status)
//	backend-routed           Kong routes to the EndpointSlice's Pod IPs (services, endpointslices)
//	cross-namespace-backend  a backend in another namespace, granted by a ReferenceGrant, is routed (referencegrants)
//	https-listener           the HTTPS listener serves its TLS Secret's certificate and routes (secrets)
//	namespace-selector       allowedRoutes' namespace selector admits one namespace and not another (namespaces)
//	pod-condition            konglet.dev/config-loaded=True on konglet's Pod (pods, pods/status)
//	lease                    the Lease konglet-<gateway> is held by konglet's Pod (leases)
//	refusal-event            a Warning Event KongRefused regards the HTTPRoute Kong refused (events)
//	backendtlspolicy-status  a BackendTLSPolicy's CA ConfigMap is read and its ancestor status written (backendtlspolicies, configmaps)
var checkNames = []string{
	"gatewayclass-status", "gateway-status", "gateway-addresses", "httproute-status", "backend-routed",
	"cross-namespace-backend", "https-listener", "namespace-selector", "pod-condition", "lease", "refusal-event",
	"backendtlspolicy-status",
}

// scenarioSpec is one run of the end-to-end scenario under some RBAC.
type scenarioSpec struct {
	id       string   // names the run's extra namespaces, GatewayClass and controllerName
	rbac     *rbacSet // applied as it is
	layout   layout   // where the Pod, the Gateway and the account are
	deadline time.Duration
}

type scenarioResult struct {
	passed   map[string]bool
	lastErr  map[string]error
	requests []apiRequest // every request konglet made
	logs     string
	raced    bool
	crashed  bool          // konglet exited by itself during the run
	elapsed  time.Duration // until every check passed, or the deadline
}

func (r *scenarioResult) failing() []string {
	var out []string
	for _, n := range checkNames {
		if !r.passed[n] {
			out = append(out, n)
		}
	}
	return out
}

func (r *scenarioResult) describeFailures() string {
	var b strings.Builder
	for _, n := range r.failing() {
		fmt.Fprintf(&b, "\n  %s: %v", n, r.lastErr[n])
	}
	return b.String()
}

const (
	podName     = "kong-0"
	publishName = "kong-proxy"
	selectorKey = "deploy-test/gateway"
	webIP       = "198.18.0.10"
	apiIP       = "198.18.0.20"
	tlsWebIP    = "198.18.0.30"
)

// world holds a run's names and objects.
type world struct {
	spec                             scenarioSpec
	ctx                              context.Context
	gwNS, podNS                      string
	appNS, backendNS, otherNS        string
	class, controller                string
	kong                             *kongdouble.Double
	certPEM                          []byte
	badCreated                       bool
	cleanups                         []func()
	gatewayName, lease, refusedRoute string
}

// runScenario applies the RBAC, creates the scenario's objects, runs konglet
// as the ServiceAccount and evaluates every named check until all pass or
// the deadline passes. Errors are setup failures, not check failures.
func runScenario(spec scenarioSpec) (res *scenarioResult, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), spec.deadline+60*time.Second)
	defer cancel()
	w := newWorld(ctx, spec)
	defer w.cleanUp()
	if err := w.setUp(); err != nil {
		return nil, err
	}
	p, proxy, err := w.startKonglet()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res = &scenarioResult{passed: map[string]bool{}, lastErr: map[string]error{}}
	checks := w.checks()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(spec.deadline)
	defer deadline.Stop()
loop:
	for {
		for _, name := range checkNames {
			if res.passed[name] {
				continue
			}
			if err := checks[name](); err != nil {
				res.lastErr[name] = err
			} else {
				res.passed[name] = true
			}
		}
		// The route Kong refuses comes once this replica leads (holds the
		// Lease) and has loaded Kong: only a leader records Events.
		if !w.badCreated && res.passed["lease"] && w.kong.Loads() > 0 {
			if err := w.create(w.route(w.appNS, "bad", "bad.example.com", "http", "", "web")); err != nil {
				p.Stop()
				return nil, err
			}
			w.badCreated = true
		}
		if len(res.failing()) == 0 {
			break
		}
		select {
		case <-deadline.C:
			break loop
		case <-tick.C:
		}
	}
	res.elapsed = time.Since(start)
	res.crashed = p.Exited()
	p.Stop()
	res.requests = proxy.requests()
	res.logs = p.Logs()
	res.raced = strings.Contains(p.Logs(), "WARNING: DATA RACE")
	return res, nil
}

// newWorld names a run's objects; setUp creates them.
func newWorld(ctx context.Context, spec scenarioSpec) *world {
	w := &world{
		spec: spec, ctx: ctx,
		gwNS: spec.layout.Gateway.Namespace, podNS: spec.layout.PodNamespace,
		appNS: spec.id + "-app", backendNS: spec.id + "-backend", otherNS: spec.id + "-other",
		class: spec.id + "-konglet", controller: "konglet.dev/" + spec.id,
		gatewayName: spec.layout.Gateway.Name, lease: spec.layout.Lease,
	}
	w.refusedRoute = "httproute." + w.appNS + ".bad.0.0.0"
	return w
}

// cleanUp deletes what the run created, last first.
func (w *world) cleanUp() {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i]()
	}
}

// setUp creates the namespaces, applies the RBAC, waits until it takes
// effect and creates everything konglet serves except the refused route.
func (w *world) setUp() error {
	ctx, spec := w.ctx, w.spec
	// The namespaces: the manifests' (as relocated) and the routes'.
	for _, ns := range append(spec.rbac.namespaces(), w.gwNS, w.podNS, w.backendNS, w.otherNS) {
		if err := w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.appNS, Labels: map[string]string{selectorKey: spec.id}}}); err != nil {
		return err
	}
	if err := spec.rbac.apply(ctx); err != nil {
		return fmt.Errorf("applying the RBAC: %w", err)
	}
	w.cleanups = append(w.cleanups, func() { spec.rbac.deleteClusterScoped(context.Background()) })
	if err := poll(15*time.Second, 50*time.Millisecond, func() error { return spec.rbac.effective(ctx, spec.layout.ServiceAccount) }); err != nil {
		return fmt.Errorf("the RBAC does not take effect: %w", err)
	}
	return w.createObjects()
}

// startKonglet runs konglet as the ServiceAccount, through a recording proxy,
// against a new Kong double.
func (w *world) startKonglet() (*process, *apiProxy, error) {
	ctx, spec := w.ctx, w.spec
	// The Pod's credentials: a token bound to the Pod, from the TokenRequest
	// API, which is what the kubelet projects into konglet's container.
	pod, err := env.Kube.CoreV1().Pods(w.podNS).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(spec.layout.ServiceAccount.Namespace).CreateToken(ctx, spec.layout.ServiceAccount.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr(int64(3600)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("requesting a token for the ServiceAccount: %w", err)
	}
	proxy, err := newAPIProxy()
	if err != nil {
		return nil, nil, err
	}
	w.cleanups = append(w.cleanups, proxy.Close)
	dir, err := os.MkdirTemp("", "konglet-rbac-")
	if err != nil {
		return nil, nil, err
	}
	w.cleanups = append(w.cleanups, func() { os.RemoveAll(dir) })
	kubeconfig, err := proxy.kubeconfig(dir, tr.Status.Token)
	if err != nil {
		return nil, nil, err
	}
	w.kong = kongdouble.New(kongdouble.Options{})
	w.cleanups = append(w.cleanups, w.kong.Close)
	w.kong.RefuseEntity("route", w.refusedRoute)

	p, err := startProcess(kubeconfig, w.kong.URL(),
		"--gateway", spec.layout.Gateway.String(),
		"--publish-service", w.podNS+"/"+publishName,
		"--pod-name", podName, "--pod-namespace", w.podNS,
		"--controller-name", w.controller,
		"--lease-duration", "4s", "--lease-renew-deadline", "3s", "--lease-retry-period", "500ms")
	if err != nil {
		return nil, nil, err
	}
	return p, proxy, nil
}

// createObjects creates everything konglet serves except the refused route.
func (w *world) createObjects() error {
	w.cleanups = append(w.cleanups, func() {
		_ = env.GW.GatewayV1().GatewayClasses().Delete(context.Background(), w.class, metav1.DeleteOptions{})
	})
	certPEM, keyPEM, err := harness.SelfSigned("secure.example.com", 1)
	if err != nil {
		return err
	}
	w.certPEM = certPEM
	caPEM, err := harness.SelfSignedCA("backend-ca")
	if err != nil {
		return err
	}
	deployment, err := renderedDeployment()
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: deployment.Spec.Template.ObjectMeta, Spec: deployment.Spec.Template.Spec}
	pod.Name, pod.Namespace = podName, w.podNS
	pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: status.PodConditionType})
	selector := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{
		From:     ptr(gwv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{selectorKey: w.spec.id}},
	}}
	objects := []any{
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: w.class}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(w.controller)}},
		// konglet's Pod as users install it: the chart's rendering of
		// deploy/helm/values.yaml (its account, no automatic token, konglet's
		// projected token) with the readiness gate of readiness-gate-patch.yaml.
		pod,
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: publishName, Namespace: w.podNS},
			Spec: corev1.ServiceSpec{
				Selector: deployment.Spec.Selector.MatchLabels,
				Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)},
					{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)},
				},
			},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: publishName + "-1", Namespace: w.podNS, Labels: map[string]string{discoveryv1.LabelServiceName: publishName}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000))}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses: []string{"198.18.255.1"},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: w.podNS, Name: podName},
			}},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "secure-cert", Namespace: w.gwNS},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		},
		// Not a certificate: konglet must never read it.
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "database-password", Namespace: w.gwNS},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{"password": "hunter2"},
		},
		&gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: w.gatewayName, Namespace: w.gwNS},
			Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(w.class), Listeners: []gwv1.Listener{
				{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80, AllowedRoutes: selector},
				{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr(gwv1.Hostname("secure.example.com")),
					AllowedRoutes: selector,
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModeTerminate),
						CertificateRefs: []gwv1.SecretObjectReference{{Name: "secure-cert"}}}},
			}},
		},
		&gwv1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Name: "routes-of-app", Namespace: w.backendNS},
			Spec: gwv1.ReferenceGrantSpec{
				From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(w.appNS)}},
				To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			},
		},
		w.route(w.appNS, "web", "web.example.com", "http", "", "web"),
		w.route(w.appNS, "secure", "secure.example.com", "https", "", "web"),
		w.route(w.appNS, "cross", "api.example.com", "http", w.backendNS, "api"),
		// In a namespace without the label: not admitted.
		w.route(w.otherNS, "stray", "stray.example.com", "http", "", "web"),
		// TLS to the backend "web" of this route.
		w.route(w.appNS, "tls", "tls.example.com", "http", "", "tls-web"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "backend-ca", Namespace: w.appNS}, Data: map[string]string{"ca.crt": string(caPEM)}},
		&gwv1.BackendTLSPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "tls-web", Namespace: w.appNS},
			Spec: gwv1.BackendTLSPolicySpec{
				TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{
					Group: "", Kind: "Service", Name: "tls-web"}}},
				Validation: gwv1.BackendTLSPolicyValidation{
					CACertificateRefs: []gwv1.LocalObjectReference{{Group: "", Kind: "ConfigMap", Name: "backend-ca"}},
					Hostname:          "tls-web.example.com",
				},
			},
		},
	}
	for _, o := range objects {
		if err := w.create(o); err != nil {
			return err
		}
	}
	if err := w.backend(w.appNS, "web", webIP); err != nil {
		return err
	}
	if err := w.backend(w.appNS, "tls-web", tlsWebIP); err != nil {
		return err
	}
	return w.backend(w.backendNS, "api", apiIP)
}

// route is an HTTPRoute to one Service (in backendNS, or its own namespace).
func (w *world) route(ns, name, host, section, backendNS, service string) *gwv1.HTTPRoute {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(service), Port: ptr(gwv1.PortNumber(80))}}}
	if backendNS != "" {
		ref.Namespace = ptr(gwv1.Namespace(backendNS))
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Namespace: ptr(gwv1.Namespace(w.gwNS)), Name: gwv1.ObjectName(w.gatewayName), SectionName: ptr(gwv1.SectionName(section)),
			}}},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(host)},
			Rules:     []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{ref}}},
		},
	}
}

// backend is a Service on port 80 with one ready endpoint on 8080.
func (w *world) backend(ns, name, ip string) error {
	if err := w.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}); err != nil {
		return err
	}
	return w.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	})
}

// create creates one object as the test's admin (an existing namespace is fine).
func (w *world) create(obj any) error {
	ctx, o := w.ctx, metav1.CreateOptions{}
	var err error
	switch v := obj.(type) {
	case *corev1.Namespace:
		_, err = env.Kube.CoreV1().Namespaces().Create(ctx, v, o)
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *corev1.Pod:
		_, err = env.Kube.CoreV1().Pods(v.Namespace).Create(ctx, v, o)
	case *corev1.Service:
		_, err = env.Kube.CoreV1().Services(v.Namespace).Create(ctx, v, o)
	case *corev1.Secret:
		_, err = env.Kube.CoreV1().Secrets(v.Namespace).Create(ctx, v, o)
	case *discoveryv1.EndpointSlice:
		_, err = env.Kube.DiscoveryV1().EndpointSlices(v.Namespace).Create(ctx, v, o)
	case *gwv1.GatewayClass:
		_, err = env.GW.GatewayV1().GatewayClasses().Create(ctx, v, o)
	case *gwv1.Gateway:
		_, err = env.GW.GatewayV1().Gateways(v.Namespace).Create(ctx, v, o)
	case *gwv1.HTTPRoute:
		_, err = env.GW.GatewayV1().HTTPRoutes(v.Namespace).Create(ctx, v, o)
	case *gwv1.ReferenceGrant:
		_, err = env.GW.GatewayV1().ReferenceGrants(v.Namespace).Create(ctx, v, o)
	case *corev1.ConfigMap:
		_, err = env.Kube.CoreV1().ConfigMaps(v.Namespace).Create(ctx, v, o)
	case *gwv1.BackendTLSPolicy:
		_, err = env.GW.GatewayV1().BackendTLSPolicies(v.Namespace).Create(ctx, v, o)
	default:
		return fmt.Errorf("create: unsupported %T", obj)
	}
	if err != nil {
		return fmt.Errorf("creating %T: %w", obj, err)
	}
	return nil
}

// checks are the named checks, each nil once true.
func (w *world) checks() map[string]func() error {
	ctx := w.ctx
	gateway := func() (*gwv1.Gateway, error) {
		return env.GW.GatewayV1().Gateways(w.gwNS).Get(ctx, w.gatewayName, metav1.GetOptions{})
	}
	routeCond := func(ns, name, typ string, want metav1.ConditionStatus, reason string) error {
		r, err := env.GW.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if string(p.ControllerName) == w.controller {
				return expectCond(p.Conditions, typ, want, reason)
			}
		}
		return fmt.Errorf("HTTPRoute %s/%s has no status entry of konglet", ns, name)
	}
	return map[string]func() error{
		"backendtlspolicy-status": func() error {
			p, err := env.GW.GatewayV1().BackendTLSPolicies(w.appNS).Get(ctx, "tls-web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, a := range p.Status.Ancestors {
				if string(a.ControllerName) == w.controller {
					if err := expectCond(a.Conditions, "Accepted", metav1.ConditionTrue, "Accepted"); err != nil {
						return err
					}
					return expectCond(a.Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
				}
			}
			return fmt.Errorf("BackendTLSPolicy %s/tls-web has no ancestor entry of konglet", w.appNS)
		},
		"gatewayclass-status": func() error {
			c, err := env.GW.GatewayV1().GatewayClasses().Get(ctx, w.class, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return expectCond(c.Status.Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
		},
		"gateway-status": func() error {
			g, err := gateway()
			if err != nil {
				return err
			}
			if err := expectCond(g.Status.Conditions, "Accepted", metav1.ConditionTrue, "Accepted"); err != nil {
				return err
			}
			if err := expectCond(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed"); err != nil {
				return err
			}
			// The one replica counted: the publish Service's EndpointSlice
			// names the Pod, and the Pod carries konglet's condition.
			if c := cond(g.Status.Conditions, "Programmed"); !strings.HasPrefix(c.Message, "1 of 1 ready replicas") {
				return fmt.Errorf("Programmed says %q, want 1 of 1 ready replicas", c.Message)
			}
			for _, l := range []struct {
				name     string
				attached int32
			}{{"http", 2}, {"https", 1}} {
				i := slices.IndexFunc(g.Status.Listeners, func(s gwv1.ListenerStatus) bool { return string(s.Name) == l.name })
				if i < 0 {
					return fmt.Errorf("no status for listener %s", l.name)
				}
				s := g.Status.Listeners[i]
				if err := expectCond(s.Conditions, "Programmed", metav1.ConditionTrue, "Programmed"); err != nil {
					return fmt.Errorf("listener %s: %w", l.name, err)
				}
				if s.AttachedRoutes < l.attached {
					return fmt.Errorf("listener %s: attachedRoutes %d, want at least %d", l.name, s.AttachedRoutes, l.attached)
				}
			}
			return nil
		},
		"gateway-addresses": func() error {
			g, err := gateway()
			if err != nil {
				return err
			}
			svc, err := env.Kube.CoreV1().Services(w.podNS).Get(ctx, publishName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != svc.Spec.ClusterIP {
				return fmt.Errorf("addresses %v, want the ClusterIP %s", g.Status.Addresses, svc.Spec.ClusterIP)
			}
			return nil
		},
		"httproute-status": func() error {
			if err := routeCond(w.appNS, "web", "Accepted", metav1.ConditionTrue, "Accepted"); err != nil {
				return err
			}
			if err := routeCond(w.appNS, "web", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"); err != nil {
				return err
			}
			return routeCond(w.otherNS, "stray", "Accepted", metav1.ConditionFalse, "NotAllowedByListeners")
		},
		"backend-routed": func() error {
			return w.routesTo(kongdouble.Request{ListenPort: 8000, Host: "web.example.com", Path: "/"}, webIP+":8080")
		},
		"cross-namespace-backend": func() error {
			return w.routesTo(kongdouble.Request{ListenPort: 8000, Host: "api.example.com", Path: "/"}, apiIP+":8080")
		},
		"https-listener": func() error {
			if err := w.routesTo(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "secure.example.com", Host: "secure.example.com", Path: "/"},
				webIP+":8080"); err != nil {
				return err
			}
			var cfg struct {
				Certificates []struct {
					Cert string `json:"cert"`
					SNIs []struct {
						Name string `json:"name"`
					} `json:"snis"`
				} `json:"certificates"`
			}
			if err := json.Unmarshal(w.kong.RawConfig(), &cfg); err != nil {
				return fmt.Errorf("Kong's configuration: %w", err)
			}
			for _, c := range cfg.Certificates {
				if strings.TrimSpace(c.Cert) == strings.TrimSpace(string(w.certPEM)) &&
					slices.ContainsFunc(c.SNIs, func(s struct {
						Name string `json:"name"`
					}) bool {
						return s.Name == "secure.example.com"
					}) {
					return nil
				}
			}
			return fmt.Errorf("Kong holds no certificate from the Secret for secure.example.com")
		},
		"namespace-selector": func() error {
			if err := w.routesTo(kongdouble.Request{ListenPort: 8000, Host: "web.example.com", Path: "/"}, webIP+":8080"); err != nil {
				return fmt.Errorf("the labelled namespace's route: %w", err)
			}
			if d, ok := w.kong.Route(kongdouble.Request{ListenPort: 8000, Host: "stray.example.com", Path: "/"}); ok {
				return fmt.Errorf("the route of the unlabelled namespace is served (%s)", d.RouteName)
			}
			return nil
		},
		"pod-condition": func() error {
			pod, err := env.Kube.CoreV1().Pods(w.podNS).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == status.PodConditionType {
					if c.Status != corev1.ConditionTrue || c.Reason != status.ReasonLoaded {
						return fmt.Errorf("%s is %s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
					}
					return nil
				}
			}
			return fmt.Errorf("no %s condition on the Pod", status.PodConditionType)
		},
		"lease": func() error {
			l, err := env.Kube.CoordinationV1().Leases(w.gwNS).Get(ctx, w.lease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != podName {
				return fmt.Errorf("Lease %s held by %v", w.lease, l.Spec.HolderIdentity)
			}
			return nil
		},
		"refusal-event": func() error {
			if !w.badCreated {
				return fmt.Errorf("the refused route is not created yet (it waits for the Lease and a first load)")
			}
			evs, err := env.Kube.EventsV1().Events(w.appNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == "KongRefused" && e.Type == corev1.EventTypeWarning &&
					e.Regarding.Kind == "HTTPRoute" && e.Regarding.Namespace == w.appNS && e.Regarding.Name == "bad" {
					return nil
				}
			}
			return fmt.Errorf("no Warning Event KongRefused regarding HTTPRoute %s/bad (%d events)", w.appNS, len(evs.Items))
		},
	}
}

// routesTo is nil when the double sends the request to exactly target.
func (w *world) routesTo(req kongdouble.Request, target string) error {
	d, ok := w.kong.Route(req)
	if !ok {
		return fmt.Errorf("Kong would answer 404 for %s%s on :%d", req.Host, req.Path, req.ListenPort)
	}
	var got []string
	for _, t := range d.Targets {
		got = append(got, t.Target)
	}
	if !slices.Equal(got, []string{target}) {
		return fmt.Errorf("%s%s goes to %v, want %s", req.Host, req.Path, got, target)
	}
	return nil
}

var (
	cond       = harness.Cond
	expectCond = harness.ExpectCond
)
