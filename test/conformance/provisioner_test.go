package conformance

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/cluster"
	"github.com/konglet/konglet/test/kongdouble"
)

// provisioner plays what a Gateway provisioner and the network do for each
// Gateway of the conformance GatewayClass: it starts a Kong (the double,
// with the run's router flavor) with one Kong listen per listener port and kind, a
// LoadBalancer Service in front of it whose ingress IP is a loopback
// address of its own (127.0.1.N) with the listener ports mapped onto the
// Kong listens (Kong's port_maps says the same), serves the Kong data plane
// on <ingress IP>:<port> (what kube-proxy and the load balancer would do),
// and runs a konglet process bound to the Gateway and the Service.
type provisioner struct {
	env      *cluster.Cluster
	class    string
	konglet  string // binary
	logDir   string
	resolve  kongdouble.Resolver
	logf     func(string, ...any)
	flavor   string
	stopping atomic.Bool

	mu     sync.Mutex
	nextIP int
	gws    map[string]*gatewayInstance
}

// gatewayInstance is the Kong Deployment of one Gateway.
type gatewayInstance struct {
	namespace, name, service string
	ip                       string
	admin                    *httptest.Server // stable admin API URL in front of the current double
	double                   atomic.Pointer[kongdouble.Double]
	dataPlane                atomic.Pointer[kongdouble.DataPlane]
	listensKey               string
	dumpedHash               string
	fronts                   map[string]io.Closer // by kind/port
	konglet                  *exec.Cmd
	kongletDone              chan struct{}
	logs                     *os.File
}

// listenKind is the kind of Kong listen a Gateway listener protocol needs.
func listenKind(p gwv1.ProtocolType) string {
	switch p {
	case gwv1.HTTPProtocolType:
		return "http"
	case gwv1.HTTPSProtocolType:
		return "https"
	case gwv1.TLSProtocolType:
		return "tls"
	case gwv1.TCPProtocolType:
		return "tcp"
	case gwv1.UDPProtocolType:
		return "udp"
	}
	return ""
}

// kongPort is the Kong listen of a kind for a Service port.
func kongPort(kind string, port int) int {
	base := map[string]int{"http": 10000, "https": 20000, "tcp": 30000, "tls": 40000, "udp": 50000}[kind]
	return base + port%10000
}

type servicePort struct {
	port int
	kind string
}

// servicePorts are the Service ports a Gateway needs: one per listener
// port (the first listener's kind wins for a port).
func servicePorts(gw *gwv1.Gateway) []servicePort {
	seen := map[int]bool{}
	var out []servicePort
	for _, l := range gw.Spec.Listeners {
		kind := listenKind(l.Protocol)
		if kind == "" || seen[int(l.Port)] {
			continue
		}
		seen[int(l.Port)] = true
		out = append(out, servicePort{port: int(l.Port), kind: kind})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out
}

func kongOptions(flavor string, ports []servicePort) kongdouble.Options {
	opts := kongdouble.Options{RouterFlavor: flavor, ProxyListeners: []kongdouble.Listener{}, StreamListeners: []kongdouble.Listener{}, PortMaps: []string{}}
	for _, p := range ports {
		l := kongdouble.Listener{IP: "0.0.0.0", Port: kongPort(p.kind, p.port)}
		switch p.kind {
		case "http":
			l.HTTP2 = true
			opts.ProxyListeners = append(opts.ProxyListeners, l)
		case "https":
			l.SSL, l.HTTP2 = true, true
			opts.ProxyListeners = append(opts.ProxyListeners, l)
		case "tcp":
			opts.StreamListeners = append(opts.StreamListeners, l)
		case "tls":
			l.SSL = true
			opts.StreamListeners = append(opts.StreamListeners, l)
		case "udp":
			l.UDP = true
			opts.StreamListeners = append(opts.StreamListeners, l)
		}
		opts.PortMaps = append(opts.PortMaps, fmt.Sprintf("%d:%d", p.port, l.Port))
	}
	return opts
}

func serviceName(gw string) string {
	name := "kong-" + gw
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(gw))
		name = name[:50] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return name
}

func newProvisioner(env *cluster.Cluster, class, flavor, konglet, logDir string, resolve kongdouble.Resolver, logf func(string, ...any)) *provisioner {
	return &provisioner{env: env, class: class, flavor: flavor, konglet: konglet, logDir: logDir, resolve: resolve, logf: logf, gws: map[string]*gatewayInstance{}}
}

// run reconciles every Gateway of the class until ctx ends, then tears
// everything down.
func (p *provisioner) run(ctx context.Context) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		p.reconcile(ctx)
		select {
		case <-ctx.Done():
			p.stopping.Store(true)
			p.mu.Lock()
			defer p.mu.Unlock()
			for key, gi := range p.gws {
				p.teardown(context.Background(), gi, false)
				delete(p.gws, key)
			}
			return
		case <-tick.C:
		}
	}
}

func (p *provisioner) reconcile(ctx context.Context) {
	list, err := p.env.GW.GatewayV1().Gateways("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for i := range list.Items {
		gw := &list.Items[i]
		if string(gw.Spec.GatewayClassName) != p.class || gw.DeletionTimestamp != nil {
			continue
		}
		key := gw.Namespace + "/" + gw.Name
		seen[key] = true
		if err := p.ensure(ctx, gw); err != nil && ctx.Err() == nil {
			p.logf("provisioner: %s: %v", key, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, gi := range p.gws {
		if !seen[key] {
			p.teardown(ctx, gi, true)
			delete(p.gws, key)
		}
	}
}

func (p *provisioner) allocateIP() string {
	p.nextIP++
	return fmt.Sprintf("127.0.%d.%d", 1+p.nextIP/250, 1+p.nextIP%250)
}

func (p *provisioner) ensure(ctx context.Context, gw *gwv1.Gateway) error {
	key := gw.Namespace + "/" + gw.Name
	p.mu.Lock()
	gi := p.gws[key]
	if gi == nil {
		gi = &gatewayInstance{namespace: gw.Namespace, name: gw.Name, service: serviceName(gw.Name), ip: p.allocateIP(), fronts: map[string]io.Closer{}}
		gi.admin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gi.double.Load().ServeHTTP(w, r)
		}))
		p.gws[key] = gi
		p.logf("provisioner: Gateway %s gets Kong %s and address %s", key, gi.admin.URL, gi.ip)
	}
	p.mu.Unlock()

	ports := servicePorts(gw)
	var keyParts []string
	for _, sp := range ports {
		keyParts = append(keyParts, fmt.Sprintf("%s/%d", sp.kind, sp.port))
	}
	listensKey := strings.Join(keyParts, ",")
	if gi.double.Load() == nil || gi.listensKey != listensKey {
		// Kong's listens are static: a new listen set is a new Kong
		// (konglet sees a new node_id and loads its configuration again).
		d := kongdouble.New(kongOptions(p.flavor, ports))
		old := gi.double.Swap(d)
		oldDP := gi.dataPlane.Swap(kongdouble.NewDataPlane(d, p.resolve))
		if old != nil {
			old.Close()
			oldDP.Close()
		}
		gi.listensKey = listensKey
	}
	if err := p.ensureService(ctx, gi, ports); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	p.ensureFronts(gi, ports)
	// Keep the last configuration with routes for debugging.
	if d := gi.double.Load(); d.ConfigHash() != gi.dumpedHash {
		gi.dumpedHash = d.ConfigHash()
		if raw := d.RawConfig(); strings.Contains(string(raw), `"routes"`) {
			name := strings.ReplaceAll(gi.namespace+"_"+gi.name, "/", "_")
			_ = os.WriteFile(filepath.Join(p.logDir, "kong-"+name+".json"), raw, 0o644)
		}
	}
	if gi.konglet == nil {
		return p.startKonglet(gi)
	}
	return nil
}

func (p *provisioner) ensureService(ctx context.Context, gi *gatewayInstance, ports []servicePort) error {
	api := p.env.Kube.CoreV1().Services(gi.namespace)
	var want []corev1.ServicePort
	for _, sp := range ports {
		proto := corev1.ProtocolTCP
		if sp.kind == "udp" {
			proto = corev1.ProtocolUDP
		}
		want = append(want, corev1.ServicePort{Name: fmt.Sprintf("%s-%d", sp.kind, sp.port), Protocol: proto,
			Port: int32(sp.port), TargetPort: intstr.FromInt(kongPort(sp.kind, sp.port))})
	}
	if len(want) == 0 {
		// a Service needs a port: one that no Kong listen serves
		want = []corev1.ServicePort{{Name: "none", Protocol: corev1.ProtocolTCP, Port: 1, TargetPort: intstr.FromInt(1)}}
	}
	svc, err := api.Get(ctx, gi.service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		svc, err = api.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: gi.service, Namespace: gi.namespace, Labels: map[string]string{"konglet.dev/conformance-gateway": gi.name}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: want},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	if !samePorts(svc.Spec.Ports, want) {
		for i := range want {
			for _, have := range svc.Spec.Ports {
				if have.Port == want[i].Port && have.Protocol == want[i].Protocol {
					want[i].NodePort = have.NodePort
				}
			}
		}
		svc.Spec.Ports = want
		if svc, err = api.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != gi.ip {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: gi.ip}}
		if _, err := api.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func samePorts(have, want []corev1.ServicePort) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		h, w := have[i], want[i]
		if h.Name != w.Name || h.Port != w.Port || h.Protocol != w.Protocol || h.TargetPort != w.TargetPort {
			return false
		}
	}
	return true
}

// ensureFronts serves each Service port on the Gateway's address: HTTP and
// HTTPS ports reach the Kong data plane's proxy listens, TCP, TLS and UDP
// ports its stream listens.
func (p *provisioner) ensureFronts(gi *gatewayInstance, ports []servicePort) {
	want := map[string]servicePort{}
	for _, sp := range ports {
		want[fmt.Sprintf("%s/%d", sp.kind, sp.port)] = sp
	}
	for key, f := range gi.fronts {
		if _, ok := want[key]; !ok {
			_ = f.Close()
			delete(gi.fronts, key)
		}
	}
	for key, sp := range want {
		if gi.fronts[key] != nil {
			continue
		}
		listen, addr := kongPort(sp.kind, sp.port), net.JoinHostPort(gi.ip, strconv.Itoa(sp.port))
		var f io.Closer
		var err error
		switch sp.kind {
		case "http", "https":
			f, err = httpFront(gi, addr, listen, sp.kind == "https")
		case "tcp", "tls":
			f, err = streamFront(gi, addr, listen)
		case "udp":
			f, err = udpFront(gi, addr, listen)
		}
		if err != nil {
			p.logf("provisioner: %s/%s: listening on %s: %v", gi.namespace, gi.name, addr, err)
			continue
		}
		gi.fronts[key] = f
	}
}

func httpFront(gi *gatewayInstance, addr string, listen int, isTLS bool) (io.Closer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gi.dataPlane.Load().Handler(listen, isTLS).ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(discard{}, "", 0),
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if isTLS {
		protocols.SetHTTP2(true)
		srv.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				return gi.dataPlane.Load().TLSConfig().GetCertificate(hello)
			},
		}
		srv.Protocols = protocols
		go func() { _ = srv.ServeTLS(l, "", "") }()
	} else {
		protocols.SetUnencryptedHTTP2(true)
		srv.Protocols = protocols
		go func() { _ = srv.Serve(l) }()
	}
	return srv, nil
}

// streamFront hands each connection to the Kong stream listen listen.
func streamFront(gi *gatewayInstance, addr string, listen int) (io.Closer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go gi.dataPlane.Load().ServeConn(listen, conn)
		}
	}()
	return l, nil
}

func udpFront(gi *gatewayInstance, addr string, listen int) (io.Closer, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	go func() { _ = kongdouble.ServeUDP(pc, listen, gi.dataPlane.Load) }()
	return pc, nil
}

func (p *provisioner) startKonglet(gi *gatewayInstance) error {
	name := strings.ReplaceAll(gi.namespace+"_"+gi.name, "/", "_")
	logs, err := os.Create(filepath.Join(p.logDir, "konglet-"+name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(p.konglet, "run",
		"--kubeconfig", p.env.Kubeconfig,
		"--kong-admin-url", gi.admin.URL,
		"--gateway", gi.namespace+"/"+gi.name,
		"--publish-service", gi.namespace+"/"+gi.service,
		"--listen", "127.0.0.1:0",
		"--kong-poll-interval", "200ms",
		"--log-level", "debug",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		logs.Close()
		return err
	}
	gi.konglet, gi.logs, gi.kongletDone = cmd, logs, make(chan struct{})
	go func(done chan struct{}) {
		err := cmd.Wait()
		if !p.stopping.Load() {
			var exit *exec.ExitError
			if errors.As(err, &exit) && !exit.Exited() {
				err = nil // stopped by the provisioner
			}
			if err != nil {
				p.logf("provisioner: konglet for %s/%s ended: %v", gi.namespace, gi.name, err)
			}
		}
		close(done)
	}(gi.kongletDone)
	return nil
}

// teardown stops the Gateway's konglet, data plane and Kong, and deletes
// its Service (deleteService: the Gateway is gone, not the harness).
func (p *provisioner) teardown(ctx context.Context, gi *gatewayInstance, deleteService bool) {
	if gi.konglet != nil {
		_ = gi.konglet.Process.Signal(os.Interrupt)
		select {
		case <-gi.kongletDone:
		case <-time.After(10 * time.Second):
			_ = gi.konglet.Process.Kill()
			<-gi.kongletDone
		}
		gi.logs.Close()
	}
	for _, f := range gi.fronts {
		_ = f.Close()
	}
	gi.admin.Close()
	if d := gi.double.Load(); d != nil {
		d.Close()
	}
	if dp := gi.dataPlane.Load(); dp != nil {
		dp.Close()
	}
	if deleteService {
		err := p.env.Kube.CoreV1().Services(gi.namespace).Delete(ctx, gi.service, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			p.logf("provisioner: deleting Service %s/%s: %v", gi.namespace, gi.service, err)
		}
	}
	p.logf("provisioner: Gateway %s/%s removed", gi.namespace, gi.name)
}
