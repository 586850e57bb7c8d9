package conformance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// podSim plays the kubelet of one Node for every Pod of the cluster: it
// binds Pods to its Node, gives each a Pod IP in 198.18.0.0/15 (the API
// server refuses loopback addresses in EndpointSlices; these are never
// routed), marks it Running and Ready, deletes it when it is terminating,
// and serves the suite's echo protocol for it on loopback listeners that
// the Kong data plane dials instead of the Pod IP (resolve).
type podSim struct {
	kube kubernetes.Interface
	node string
	logf func(string, ...any)

	mu    sync.Mutex
	next  int
	byIP  map[string]*simPod
	byUID map[types.UID]*simPod
}

type simPod struct {
	namespace, name, ip string
	image               string // the first container's
	env                 map[string]string
	files               map[string][]byte // the first container's mounted Secret files, by path
	servers             map[int]io.Closer
	addrs               map[int]string
}

const simNode = "konglet-conformance-node"

func newPodSim(kube kubernetes.Interface, logf func(string, ...any)) *podSim {
	return &podSim{kube: kube, node: simNode, logf: logf, byIP: map[string]*simPod{}, byUID: map[types.UID]*simPod{}}
}

// run creates the Node and handles Pods until ctx ends.
func (s *podSim) run(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.node, Labels: map[string]string{"kubernetes.io/hostname": s.node}}}
	created, err := s.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err == nil {
		now := metav1.Now()
		created.Status = corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.19.255.1"}},
			Capacity:  corev1.ResourceList{}, Allocatable: corev1.ResourceList{},
		}
		if _, err := s.kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	factory := informers.NewSharedInformerFactory(s.kube, 0)
	pods := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for range 4 {
		go func() {
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				pod, err := pods.Lister().Pods(ns).Get(name)
				if apierrors.IsNotFound(err) {
					s.forget(ns, name)
					queue.Forget(key)
				} else if err == nil {
					if err := s.handle(ctx, pod.DeepCopy()); err != nil && ctx.Err() == nil {
						queue.AddRateLimited(key)
					} else {
						queue.Forget(key)
					}
				}
				queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.byUID {
		p.stop()
	}
	return nil
}

func (s *podSim) handle(ctx context.Context, pod *corev1.Pod) error {
	pods := s.kube.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		s.forgetUID(pod.UID)
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Spec.NodeName == "" {
		err := pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: s.node},
		}, metav1.CreateOptions{})
		if apierrors.IsConflict(err) {
			return nil // already bound: the update event comes
		}
		return err
	}
	files, err := s.mountedFiles(ctx, pod)
	if err != nil {
		return err // as a kubelet, start the Pod once its volumes can be mounted
	}
	sp := s.podFor(pod, files)
	if pod.Status.PodIP == sp.ip && podReady(pod) {
		return nil
	}
	now := metav1.Now()
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP, pod.Status.HostIPs = "198.19.255.1", []corev1.HostIP{{IP: "198.19.255.1"}}
	pod.Status.PodIP, pod.Status.PodIPs = sp.ip, []corev1.PodIP{{IP: sp.ip}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers), cond(corev1.PodInitialized), cond(corev1.ContainersReady),
		cond(corev1.PodReady), cond(corev1.PodScheduled),
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: new(bool), Image: c.Image, ImageID: "sim://" + c.Image,
			ContainerID: "sim://" + string(pod.UID) + "/" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
		*pod.Status.ContainerStatuses[len(pod.Status.ContainerStatuses)-1].Started = true
	}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// mountedFiles reads the Secret volumes the first container mounts, as
// files by path (the echo image reads its TLS certificate and key there).
func (s *podSim) mountedFiles(ctx context.Context, pod *corev1.Pod) (map[string][]byte, error) {
	files := map[string][]byte{}
	if len(pod.Spec.Containers) == 0 {
		return files, nil
	}
	s.mu.Lock()
	known := s.byUID[pod.UID] != nil
	s.mu.Unlock()
	if known {
		return nil, nil
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				// The tls-backend Pods read client CA certificates here.
				cm, err := s.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("volume %s: %w", v.Name, err)
				}
				for key, data := range cm.Data {
					if len(v.ConfigMap.Items) == 0 {
						files[path.Join(m.MountPath, key)] = []byte(data)
					}
				}
				for _, item := range v.ConfigMap.Items {
					files[path.Join(m.MountPath, item.Path)] = []byte(cm.Data[item.Key])
				}
			}
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			secret, err := s.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if len(v.Secret.Items) == 0 {
				for key, data := range secret.Data {
					files[path.Join(m.MountPath, key)] = data
				}
			}
			for _, item := range v.Secret.Items {
				files[path.Join(m.MountPath, item.Path)] = secret.Data[item.Key]
			}
		}
	}
	return files, nil
}

// podFor returns the simulated Pod for pod, assigning it an IP.
func (s *podSim) podFor(pod *corev1.Pod, files map[string][]byte) *simPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.byUID[pod.UID]; sp != nil {
		return sp
	}
	var ip string
	for {
		s.next++
		a, b := (s.next>>8)&0x1ff, s.next&0xff
		if b == 0 || b == 255 {
			continue
		}
		ip = fmt.Sprintf("198.%d.%d.%d", 18+a>>8, a&0xff, b)
		break
	}
	env, image := map[string]string{}, ""
	if len(pod.Spec.Containers) > 0 {
		image = pod.Spec.Containers[0].Image
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
	}
	sp := &simPod{namespace: pod.Namespace, name: pod.Name, ip: ip, image: image, env: env, files: files, servers: map[int]io.Closer{}, addrs: map[int]string{}}
	s.byUID[pod.UID], s.byIP[ip] = sp, sp
	return sp
}

func (s *podSim) forgetUID(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.byUID[uid]; sp != nil {
		sp.stop()
		delete(s.byUID, uid)
		delete(s.byIP, sp.ip)
	}
}

func (s *podSim) forget(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, sp := range s.byUID {
		if sp.namespace == ns && sp.name == name {
			sp.stop()
			delete(s.byUID, uid)
			delete(s.byIP, sp.ip)
		}
	}
}

func (sp *simPod) stop() {
	for _, srv := range sp.servers {
		_ = srv.Close()
	}
}

// resolve is the Kong data plane's view of the network: a target
// "198.18.x.y:port" reaches the simulated Pod's server for that port,
// started on first use. ok is false (connection refused) for an unknown
// Pod or a port the Pod's container does not serve.
func (s *podSim) resolve(target string) (string, bool) {
	host, portStr, err := net.SplitHostPort(target)
	if err != nil {
		return "", false
	}
	port, _ := strconv.Atoi(portStr)
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.byIP[host]
	if sp == nil {
		return "", false
	}
	if addr, ok := sp.addrs[port]; ok {
		return addr, true
	}
	if sp.env["GRPC_ECHO_SERVER"] != "" {
		if port != envPort(sp.env, "HTTP_PORT", 3000) {
			return "", false
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", false
		}
		sp.servers[port], sp.addrs[port] = serveGRPCEcho(l, sp), l.Addr().String()
		return l.Addr().String(), true
	}
	if strings.HasPrefix(sp.image, coreDNSImage) {
		return sp.startCoreDNS(port)
	}
	if sp.env["TCP_ECHO_SERVER"] != "" || sp.env["UDP_ECHO_SERVER"] != "" {
		return sp.startStreamEcho(port)
	}
	handler, h2c, tlsCfg := sp.handlerFor(port)
	if handler == nil {
		return "", false
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", false
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(discard{}, "", 0)}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if h2c {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv.Protocols = protocols
	if tlsCfg != nil {
		protocols.SetHTTP2(true)
		l = tls.NewListener(l, tlsCfg)
	}
	go func() { _ = srv.Serve(l) }()
	sp.servers[port], sp.addrs[port] = srv, l.Addr().String()
	return l.Addr().String(), true
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// handlerFor is what the suite's echo-basic image serves on port (HTTP on
// HTTP_PORT or 3000, h2c on H2C_PORT or 3001, HTTPS on HTTPS_PORT or 8443
// when TLS_SERVER_CERT and TLS_SERVER_PRIVKEY name its mounted files); its
// gRPC, TCP and UDP modes are served by resolve.
func (sp *simPod) handlerFor(port int) (_ http.Handler, h2c bool, _ *tls.Config) {
	httpPort, h2cPort := envPort(sp.env, "HTTP_PORT", 3000), envPort(sp.env, "H2C_PORT", 3001)
	switch port {
	case httpPort:
		return sp.echoMux(strconv.Itoa(httpPort)), false, nil
	case h2cPort:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 && r.Header.Get("Upgrade") != "h2c" {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, "Expected h2c request")
				return
			}
			sp.echo(w, r, strconv.Itoa(httpPort))
		}), true, nil
	case envPort(sp.env, "HTTPS_PORT", 8443):
		if cfg := sp.tlsConfig("TLS_SERVER_CERT", "TLS_SERVER_PRIVKEY"); cfg != nil {
			return sp.echoMux(strconv.Itoa(httpPort)), false, cfg
		}
	}
	return nil, false, nil
}

func envPort(env map[string]string, key string, def int) int {
	if p, err := strconv.Atoi(env[key]); err == nil {
		return p
	}
	return def
}

var reStatus = regexp.MustCompile(`^/status/(\d\d\d)$`)

// echoMux is echo-basic's HTTP server (conformance/echo-basic/echo-basic.go
// in sigs.k8s.io/gateway-api/conformance v1.6.3), minus the
// retry-simulation endpoints.
func (sp *simPod) echoMux(httpPort string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("OK"))
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusBadRequest
		if m := reStatus.FindStringSubmatch(r.RequestURI); m != nil {
			code, _ = strconv.Atoi(m[1])
		}
		w.WriteHeader(code)
	})
	// echo-basic's wsHandler: every frame back until EOF.
	mux.Handle("/ws", websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) }))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { sp.echo(w, r, httpPort) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.ReplaceAll(r.URL.Path, "//", "/")
		mux.ServeHTTP(w, r)
	})
}

func (sp *simPod) echo(w http.ResponseWriter, r *http.Request, httpPort string) {
	if d := r.FormValue("delay"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"message":%q}`, err.Error()), http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(dur):
		case <-r.Context().Done():
			return
		}
	}
	fields := map[string]any{
		"path": r.RequestURI, "host": r.Host, "method": r.Method, "proto": r.Proto, "headers": r.Header,
		"httpPort": httpPort, "namespace": sp.namespace, "ingress": "", "service": "", "pod": sp.name,
	}
	if r.TLS != nil {
		fields["tls"] = tlsAssertions(r.TLS)
	}
	body, err := json.MarshalIndent(fields, "", " ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, kvs := range r.Header["X-Echo-Set-Header"] {
		for _, kv := range strings.Split(kvs, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(kv), ":")
			if name == "" {
				continue
			}
			if len(w.Header()[name]) == 0 {
				w.Header()[name] = []string{value}
			} else {
				w.Header()[name][0] += "," + strings.TrimSpace(value)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}
