package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/konglet/konglet/informers"
	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/leader"
	"github.com/konglet/konglet/sync/reconcile"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/status"
)

// config is everything `konglet run` is told, from flags or KONGLET_* env.
type config struct {
	gateways         namesFlag
	publishService   nameFlag
	controllerName   string
	kongAdminURL     string
	kongTimeout      time.Duration
	kongPoll         time.Duration
	podName          string
	podNamespace     string
	kubeconfig       string
	listen           string
	quiet, maxDelay  time.Duration
	serviceUpstream  bool
	externalName     bool
	maxConfigBytes   int
	maxObjectBytes   int
	maxSecretBytes   int
	maxSecretWatches int
	maxCABytes       int
	maxCAWatches     int
	logLevel         string
	leaderElection   bool
	kubeQPS          float64
	kubeBurst        int
	kubeCompression  bool
	leaseTiming      leader.Timing
	// releaseBinary: unmap the binary's idle pages (releaseBinaryPages).
	releaseBinary bool
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.Var(&c.gateways, "gateway", "bind to this Gateway, namespace/name (repeatable; required)")
	fs.Var(&c.publishService, "publish-service", "the Service in front of Kong, namespace/name (default: the Service that selects this Pod)")
	fs.StringVar(&c.controllerName, "controller-name", snapshot.DefaultControllerName, "the GatewayClass controllerName konglet owns")
	fs.StringVar(&c.kongAdminURL, "kong-admin-url", "http://localhost:8001", "Kong's admin API")
	fs.DurationVar(&c.kongTimeout, "kong-timeout", 10*time.Second, "timeout of one admin API request")
	fs.DurationVar(&c.kongPoll, "kong-poll-interval", 500*time.Millisecond, "how often to check that Kong still holds the configuration")
	fs.StringVar(&c.podName, "pod-name", os.Getenv("POD_NAME"), "this Pod's name (downward API; default $POD_NAME)")
	fs.StringVar(&c.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "this Pod's namespace (downward API; default $POD_NAMESPACE)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster)")
	fs.StringVar(&c.listen, "listen", ":9542", "address of /metrics, /healthz and /readyz")
	fs.DurationVar(&c.quiet, "sync-quiet-period", 20*time.Millisecond, "a change after a pause this long syncs at once; closer changes are coalesced until they pause this long")
	fs.DurationVar(&c.maxDelay, "sync-max-delay", 80*time.Millisecond, "but no later than this after the first change (or when the sync under way ends)")
	fs.BoolVar(&c.serviceUpstream, "service-upstream", false, "target Services by DNS name instead of Pod IPs (for a mesh); the Service annotation konglet.dev/upstream overrides it")
	fs.BoolVar(&c.externalName, "allow-external-name", false, "let routes use ExternalName Services; konglet resolves their names every 30s and refuses addresses on loopback, link-local, cloud metadata, Kong Pods and other namespaces' ClusterIPs (docs/security.md)")
	fs.IntVar(&c.maxConfigBytes, "max-config-bytes", 10<<20, "largest POST /config body sent to Kong (Kong's admin API refuses bodies above nginx_admin_client_max_body_size, 10m by default)")
	// A tenth of the default document: the largest routes people write take
	// tens of kilobytes, and one object can never take most of the budget.
	fs.IntVar(&c.maxObjectBytes, "max-object-config-bytes", 1<<20, "largest share of the configuration one route may take; a larger route is left out and told why (0: no limit)")
	fs.IntVar(&c.maxSecretBytes, "max-secret-bytes", informers.DefaultMaxSecretBytes, "largest data of a Secret a listener may use; a larger one is refused on the listener and its data not kept")
	fs.IntVar(&c.maxSecretWatches, "max-secret-watches", informers.DefaultMaxSecretWatches, "most Secrets watched at once (one watch each on the API server, from every replica); listeners naming more are told, the Gateways' own namespaces' Secrets first")
	fs.IntVar(&c.maxCABytes, "max-configmap-bytes", informers.DefaultMaxConfigMapBytes, "largest ca.crt of a ConfigMap a BackendTLSPolicy may use; a larger one is refused on the policy (its backends fail) and not kept")
	fs.IntVar(&c.maxCAWatches, "max-configmap-watches", informers.DefaultMaxConfigMapWatches, "most CA ConfigMaps watched at once; policies naming more are told, the Gateways' own namespaces' ConfigMaps first")
	fs.BoolVar(&c.releaseBinary, "release-binary-pages", true, "when the caches have synced and when idle after some work, unmap the pages of konglet's own code it does not use (they stay in the page cache; off where a tracer adds uprobes to konglet while it runs)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&c.kubeQPS, "kube-api-qps", 200, "requests per second to the API server (status writes come in bursts when many routes change)")
	fs.IntVar(&c.kubeBurst, "kube-api-burst", 400, "burst of requests to the API server")
	fs.BoolVar(&c.kubeCompression, "kube-api-compression", false, "ask the API server to gzip its answers (lists, and since Kubernetes 1.37 each informer's watch stream, gzipped for every replica apart): worth it only where the network to the API server is slow")
	fs.BoolVar(&c.leaderElection, "leader-election", true, "elect one replica per Gateway to write statuses (a Lease konglet-<gateway> in the Gateway's namespace)")
	fs.DurationVar(&c.leaseTiming.LeaseDuration, "lease-duration", 15*time.Second, "how long a leader holds the Lease without renewing it")
	fs.DurationVar(&c.leaseTiming.RenewDeadline, "lease-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops writing")
	fs.DurationVar(&c.leaseTiming.RetryPeriod, "lease-retry-period", 2*time.Second, "how often candidates try to take the Lease")
}

func runSidecar(args []string, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("konglet run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	if err := parseFlags(fs, args); err != nil {
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		fmt.Fprintln(stderr, "konglet run: --log-level:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// client-go logs through klog: send it to the same JSON stream.
	klog.SetSlogLogger(log)
	if len(cfg.gateways) == 0 {
		log.Error("no Gateway to serve: set --gateway namespace/name (or KONGLET_GATEWAY)")
		return 2
	}
	if cfg.maxSecretBytes <= 0 || cfg.maxSecretWatches <= 0 || cfg.maxCABytes <= 0 || cfg.maxCAWatches <= 0 {
		log.Error("--max-secret-bytes, --max-secret-watches, --max-configmap-bytes and --max-configmap-watches must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("konglet stopped", "error", err.Error())
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	kube, gw, err := cfg.clients()
	if err != nil {
		return err
	}
	kong, err := admin.New(cfg.kongAdminURL, cfg.kongTimeout, cfg.maxConfigBytes)
	if err != nil {
		return err
	}
	scope := informers.Scope{
		ControllerName:   cfg.controllerName,
		ServiceUpstream:  cfg.serviceUpstream,
		Gateways:         cfg.gateways,
		PodNamespace:     cfg.podNamespace,
		PodName:          cfg.podName,
		PublishService:   types.NamespacedName(cfg.publishService),
		MaxSecretBytes:   cfg.maxSecretBytes,
		MaxSecretWatches: cfg.maxSecretWatches,

		MaxConfigMapBytes:   cfg.maxCABytes,
		MaxConfigMapWatches: cfg.maxCAWatches,
	}
	cache, err := informers.New(kube, gw, scope, informers.NewTrigger(cfg.quiet, cfg.maxDelay))
	if err != nil {
		return err
	}
	// Bound before anything starts (name resolution, leader election), so
	// that a port taken is an error at once; the address is logged, as a
	// port 0 picks it.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("serving %s: %w", cfg.listen, err)
	}
	if cfg.externalName {
		names := informers.NewExternalNames(externalNameRefresh, cache.Notify)
		cache.AllowExternalNames(names)
		go names.Run(ctx)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// This replica's name in Leases and Events: its Pod, else its host.
	identity := cfg.podName
	if identity == "" {
		identity, _ = os.Hostname()
	}
	var leads func(types.NamespacedName) bool
	if cfg.leaderElection {
		elector := leader.Run(ctx, kube, cfg.gateways, identity, cfg.leaseTiming, log, cache.Notify)
		leads = elector.Leads
		// On SIGTERM, give the Leases back before exiting (bounded: the
		// API server may be the reason we stop).
		defer func() {
			if !elector.Released(leaseReleaseTimeout) {
				log.Warn("Leases not released in time; another replica takes over after --lease-duration")
			}
		}()
	}
	writer := status.NewWriter(gw, cfg.gateways, leads, time.Now)
	var pods reconcile.PodReporter
	if cfg.podName != "" && cfg.podNamespace != "" {
		pods = status.NewPodReporter(kube, types.NamespacedName{Namespace: cfg.podNamespace, Name: cfg.podName}, time.Now)
	}
	events := status.NewEvents(kube, writer, identity)
	var pages *binaryPages
	var synced func()
	if cfg.releaseBinary {
		pages = &binaryPages{log: log, unmap: releaseBinaryPages}
		synced = pages.release
	}
	loop := reconcile.New(cache, kong, writer, pods, events, log, reconcile.NewMetrics(reg), reconcile.Options{
		KongPollInterval: cfg.kongPoll,
		Budget:           reconcile.Budget{Total: cfg.maxConfigBytes, PerObject: cfg.maxObjectBytes},
		Gateways:         cfg.gateways,
		PodName:          cfg.podName,
		Synced:           synced,
	})

	srv := &http.Server{Handler: handler(reg, loop.Ready), ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()

	log.Info("konglet starting", "version", version, "scope", scope.String(), "kong", cfg.kongAdminURL, "listen", ln.Addr().String())
	go releaseWhenIdle(ctx, pages)
	cache.Start(ctx)
	loopErr := make(chan error, 1)
	go func() { loopErr <- loop.Run(ctx) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serving %s: %w", cfg.listen, err)
	case err := <-loopErr:
		return err
	}
}

// leaseReleaseTimeout bounds the wait for the Leases on shutdown, well
// inside the Pod's termination grace period.
const leaseReleaseTimeout = 5 * time.Second

// externalNameRefresh is how often ExternalName Services' names are
// resolved again: DNS answers of external services change rarely, and each
// change reaches Kong at the next resolution.
const externalNameRefresh = 30 * time.Second

func handler(reg *prometheus.Registry, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	// Uncompressed: the page is a few tens of kilobytes, and a gzip writer
	// kept for the next scrape would hold over a megabyte in every Pod.
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "Kong holds no configuration from konglet, or no bound Gateway can be served (see the log and the Pod's konglet.dev/config-loaded condition)", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// clients are the API server's clients: Kubernetes' and Gateway API's.
func (c config) clients() (kubernetes.Interface, gwclient.Interface, error) {
	restConfig, err := restConfig(c.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	restConfig.QPS, restConfig.Burst = float32(c.kubeQPS), c.kubeBurst
	// Inside a cluster, gzip costs the API server more than the bytes cost
	// the network, once per replica (nothing is compressed once for all
	// watchers), and each open watch stream keeps a decompressor here.
	restConfig.DisableCompression = !c.kubeCompression
	// Built-in types travel as protobuf: smaller on the wire and decoded
	// with a fraction of JSON's garbage, which matters when listing
	// thousands of Services and EndpointSlices. Custom resources (Gateway
	// API) only speak JSON.
	kubeConfig := rest.CopyConfig(restConfig)
	kubeConfig.ContentType = "application/vnd.kubernetes.protobuf"
	kubeConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, nil, err
	}
	gw, err := gwclient.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, err
	}
	return kube, gw, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	c, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, errors.New("not in a cluster: set --kubeconfig")
	}
	return c, err
}
