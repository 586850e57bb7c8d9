package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/harness"
)

const controllerName = "konglet.dev/gateway-controller"

// world is one test's namespace with a GatewayClass, a Kong proxy Service
// and a Gateway, named after the test so that tests never see each other.
type world struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	class   string
	gateway string
}

var (
	worldsMu sync.Mutex
	worlds   = map[string]int{}
)

// worldRuns counts the worlds made under name in this process.
func worldRuns(name string) int {
	worldsMu.Lock()
	defer worldsMu.Unlock()
	worlds[name]++
	return worlds[name]
}

func newWorld(t *testing.T, listeners ...gwv1.Listener) *world {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	if n := worldRuns(name); n > 1 {
		// A test run again (-count) while the namespace of its last run
		// still terminates: names of its own.
		name += "-" + strconv.Itoa(n)
	}
	w := &world{t: t, ctx: context.Background(), ns: name, class: name, gateway: "kong"}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	w.create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: w.class}, Spec: gwv1.GatewayClassSpec{ControllerName: controllerName}})
	w.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kong-proxy", Namespace: w.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "kong"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)},
				{Name: "nowhere", Port: 8080, TargetPort: intstr.FromInt32(9999)},
				{Name: "tcp", Port: 7000, TargetPort: intstr.FromInt32(9000)},
				{Name: "tls", Port: 7001, TargetPort: intstr.FromInt32(9001)},
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(9053), Protocol: corev1.ProtocolUDP},
			},
		},
	})
	if len(listeners) == 0 {
		listeners = []gwv1.Listener{httpListener("http", 80, "")}
	}
	w.create(&gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: w.gateway, Namespace: w.ns},
		Spec:       gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(w.class), Listeners: listeners},
	})
	t.Cleanup(func() {
		_ = env.GW.GatewayV1().GatewayClasses().Delete(context.Background(), w.class, metav1.DeleteOptions{})
	})
	return w
}

// kongletArgs binds konglet to this world's Gateway and Service.
func (w *world) kongletArgs() []string {
	return []string{"--gateway", w.ns + "/" + w.gateway, "--publish-service", w.ns + "/kong-proxy"}
}

func httpListener(name string, port int32, hostname string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: gwv1.HTTPProtocolType, Port: gwv1.PortNumber(port),
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}}
	if hostname != "" {
		l.Hostname = ptr(gwv1.Hostname(hostname))
	}
	return l
}

func ptr[T any](v T) *T { return &v }

// create creates any of the kinds the tests use.
func (w *world) create(obj any) {
	w.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = env.Kube.CoreV1().Namespaces().Create(w.ctx, o, metav1.CreateOptions{})
		w.t.Cleanup(func() {
			_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
		})
	case *corev1.Service:
		_, err = env.Kube.CoreV1().Services(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = env.Kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
	case *gwv1.GatewayClass:
		_, err = env.GW.GatewayV1().GatewayClasses().Create(w.ctx, o, metav1.CreateOptions{})
	case *gwv1.Gateway:
		_, err = env.GW.GatewayV1().Gateways(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
	case *gwv1.HTTPRoute:
		_, err = env.GW.GatewayV1().HTTPRoutes(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
	case *gwv1.ReferenceGrant:
		_, err = env.GW.GatewayV1().ReferenceGrants(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
	default:
		w.t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatalf("create %T: %v", obj, err)
	}
}

// backend creates a Service and an EndpointSlice with the given Pod IPs
// (in 198.18.0.0/15, never routed), all ready, serving targetPort.
func (w *world) backend(ns, name string, port, targetPort int32, ips ...string) {
	w.t.Helper()
	w.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(targetPort)}},
		},
	})
	var eps []discoveryv1.Endpoint
	for _, ip := range ips {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	w.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(targetPort)}},
		Endpoints:   eps,
	})
}

// route is an HTTPRoute on this world's Gateway.
func (w *world) route(name string, hostnames []string, rules ...gwv1.HTTPRouteRule) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(w.gateway)}}},
			Rules:           rules,
		},
	}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	return r
}

func backendRef(ns, name string, port int32, weight int32) gwv1.HTTPBackendRef {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(port))},
		Weight:                 ptr(weight),
	}}
	if ns != "" {
		ref.Namespace = ptr(gwv1.Namespace(ns))
	}
	return ref
}

func (w *world) getGateway() *gwv1.Gateway {
	w.t.Helper()
	g, err := env.GW.GatewayV1().Gateways(w.ns).Get(w.ctx, w.gateway, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return g
}

func (w *world) getRoute(name string) *gwv1.HTTPRoute {
	w.t.Helper()
	r, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

var (
	cond       = harness.Cond
	expectCond = harness.ExpectCond
)

// routeParent is this world's Gateway entry of a route's status.
func (w *world) routeParent(name string) (*gwv1.RouteParentStatus, error) {
	r := w.getRoute(name)
	for i, p := range r.Status.Parents {
		if string(p.ControllerName) == controllerName && string(p.ParentRef.Name) == w.gateway {
			return &r.Status.Parents[i], nil
		}
	}
	return nil, fmt.Errorf("route %s has no status entry of konglet (parents: %v)", name, r.Status.Parents)
}

func (w *world) routeCond(name, typ string, status metav1.ConditionStatus, reason string) error {
	p, err := w.routeParent(name)
	if err != nil {
		return err
	}
	return expectCond(p.Conditions, typ, status, reason)
}

// routeCondSays checks a condition of this world's entry in a route's
// status, and that its message says part.
func (w *world) routeCondSays(name, typ string, status metav1.ConditionStatus, reason, part string) error {
	p, err := w.routeParent(name)
	if err != nil {
		return err
	}
	if err := expectCond(p.Conditions, typ, status, reason); err != nil {
		return err
	}
	if c := cond(p.Conditions, typ); !strings.Contains(c.Message, part) {
		return fmt.Errorf("%s says %q, want it to say %q", typ, c.Message, part)
	}
	return nil
}

func (w *world) listener(name string) (*gwv1.ListenerStatus, error) {
	g := w.getGateway()
	for i, l := range g.Status.Listeners {
		if string(l.Name) == name {
			return &g.Status.Listeners[i], nil
		}
	}
	return nil, fmt.Errorf("no status for listener %s (gateway status %+v)", name, g.Status)
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
