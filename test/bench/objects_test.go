//go:build bench

package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/konglet/konglet/test/harness"
)

const (
	controllerName = "konglet.dev/gateway-controller"
	gatewayNS      = "bench"
	gatewayName    = "kong"
	className      = "bench"
	appNamespaces  = 10
	workers        = 16
)

func ptr[T any](v T) *T { return &v }

// appNS is the namespace of application i.
func appNS(i int) string { return fmt.Sprintf("app-%02d", i%appNamespaces) }

func routeName(i int) string { return fmt.Sprintf("route-%05d", i) }
func svcName(i int) string   { return fmt.Sprintf("svc-%05d", i) }
func host(i int) string      { return fmt.Sprintf("route-%05d.bench.test", i) }
func editHost(i, round int) string {
	return fmt.Sprintf("edited%d-%05d.bench.test", round, i)
}

// endpointIP is the e-th Pod IP of application i, in 198.18.0.0/15.
func endpointIP(i, e int) string {
	n := i*3 + e
	return fmt.Sprintf("198.%d.%d.%d", 18+n/(250*256), n/250%256, n%250+1)
}

// clients are typed clients with a high rate limit, for bulk creation.
type clients struct {
	kube kubernetes.Interface
	gw   gwclient.Interface
}

// base creates the GatewayClass, the Gateway's namespace with the Kong proxy
// Service, the Gateway (one HTTP listener on port 80 for routes of every
// namespace) and the application namespaces.
func (c clients) base(ctx context.Context) error {
	objs := []func() error{
		func() error {
			_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatewayNS}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.gw.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className},
				Spec: gwv1.GatewayClassSpec{ControllerName: controllerName}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.kube.CoreV1().Services(gatewayNS).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kong-proxy", Namespace: gatewayNS},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "kong"},
					Ports: []corev1.ServicePort{
						{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)},
						{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			all := gwv1.NamespacesFromAll
			_, err := c.gw.GatewayV1().Gateways(gatewayNS).Create(ctx, &gwv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Name: gatewayName, Namespace: gatewayNS},
				Spec: gwv1.GatewaySpec{GatewayClassName: className, Listeners: []gwv1.Listener{{
					Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80,
					AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}},
				}}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, ns := range append(appNamespaceNames(), "counted", "secrets") {
		objs = append(objs, func() error {
			_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		})
	}
	for _, f := range objs {
		if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func appNamespaceNames() []string {
	var out []string
	for i := range appNamespaces {
		out = append(out, appNS(i))
	}
	return out
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			// Headless, as in every run so far (figures compare); konglet
			// targets the endpoints either way.
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func endpointSlice(ns, svc string, ips ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	return es
}

func httpRoute(ns, name, hostname, backend string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Name: gatewayName, Namespace: ptr(gwv1.Namespace(gatewayNS)),
			}}},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(hostname)},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(backend), Port: ptr(gwv1.PortNumber(80))},
			}}}}},
		},
	}
}

// createBackend creates application i's Service and EndpointSlice.
func (c clients) createBackend(ctx context.Context, i int) error {
	ns := appNS(i)
	if err := ignoreExists(retry(func() error {
		_, err := c.kube.CoreV1().Services(ns).Create(ctx, service(ns, svcName(i)), metav1.CreateOptions{})
		return err
	})); err != nil {
		return err
	}
	return ignoreExists(retry(func() error {
		_, err := c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpointSlice(ns, svcName(i), endpointIP(i, 0), endpointIP(i, 1), endpointIP(i, 2)), metav1.CreateOptions{})
		return err
	}))
}

// createRoute creates application i's HTTPRoute.
func (c clients) createRoute(ctx context.Context, i int) error {
	ns := appNS(i)
	return ignoreExists(retry(func() error {
		_, err := c.gw.GatewayV1().HTTPRoutes(ns).Create(ctx, httpRoute(ns, routeName(i), host(i), svcName(i)), metav1.CreateOptions{})
		return err
	}))
}

// apps creates applications [from, to): backend and route.
func (c clients) apps(ctx context.Context, from, to int) error {
	return parallel(from, to, func(i int) error {
		if err := c.createBackend(ctx, i); err != nil {
			return err
		}
		return c.createRoute(ctx, i)
	})
}

// parallel runs f for [from, to) on the worker pool and returns the first error.
func parallel(from, to int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// retry retries transient API errors (throttling, timeouts) a few times.
func retry(f func() error) error {
	var err error
	for attempt := range 6 {
		err = f()
		if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			return err
		}
		<-time.After(time.Duration(50<<attempt) * time.Millisecond) // backoff between attempts, not a wait on a condition
	}
	return err
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// selfSigned is one self-signed certificate and key in PEM.

// secrets creates tls TLS Secrets (one certificate reused) and opaque
// Opaque Secrets of 10 KB each, in the "secrets" namespace.
func (c clients) secrets(ctx context.Context, tls, opaque int) error {
	cert, key, err := harness.SelfSigned("bench.test", 1)
	if err != nil {
		return err
	}
	if err := parallel(0, tls, func(i int) error {
		return ignoreExists(retry(func() error {
			_, err := c.kube.CoreV1().Secrets("secrets").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tls-%04d", i), Namespace: "secrets"},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
			}, metav1.CreateOptions{})
			return err
		}))
	}); err != nil {
		return err
	}
	blob := make([]byte, 10<<10)
	_, _ = rand.Read(blob)
	return parallel(0, opaque, func(i int) error {
		return ignoreExists(retry(func() error {
			_, err := c.kube.CoreV1().Secrets("secrets").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("opaque-%05d", i), Namespace: "secrets"},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{"blob": blob},
			}, metav1.CreateOptions{})
			return err
		}))
	})
}
