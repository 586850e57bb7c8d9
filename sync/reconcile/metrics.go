package reconcile

import "github.com/prometheus/client_golang/prometheus"

// Metrics are konglet's Prometheus metrics (DESIGN decision 10).
type Metrics struct {
	syncDuration   prometheus.Histogram
	pushes         *prometheus.CounterVec
	configBytes    prometheus.Gauge
	lastSuccess    prometheus.Gauge
	refused        prometheus.Gauge
	kongReachable  prometheus.Gauge
	statusWrites   prometheus.Counter
	kongRoutes     prometheus.Gauge
	kongRestarts   prometheus.Counter
	statusFailures prometheus.Counter
	configCurrent  prometheus.Gauge
	gatewayUsable  *prometheus.GaugeVec
	// routesTranslated counts the routes of the bound Gateways translated
	// anew; the others were taken over from the previous translation
	// (translate.Memo).
	routesTranslated prometheus.Counter
}

// Push results, the values of konglet_kong_pushes_total{result}.
const (
	pushLoaded    = "loaded"
	pushUnchanged = "unchanged"
	pushRefused   = "refused"
	pushFailed    = "failed"
)

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "konglet_sync_duration_seconds",
			Help:    "Time of one sync: snapshot, translation, load into Kong and status writes.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "konglet_kong_pushes_total",
			Help: "Configurations considered for Kong, by result: loaded, unchanged (Kong already had it), refused (Kong said 400), failed (Kong unreachable or erring).",
		}, []string{"result"}),
		configBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_config_bytes",
			Help: "Size of the last configuration document built for Kong (also when too large to send).",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_last_successful_load_timestamp_seconds",
			Help: "Unix time of the last sync after which Kong held the current configuration (loaded, or confirmed unchanged).",
		}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_refused_objects",
			Help: "Kubernetes objects left out of the configuration because Kong refused what they produce.",
		}),
		kongReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_kong_reachable",
			Help: "1 when the last request to Kong's admin API got an answer, else 0.",
		}),
		statusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "konglet_status_writes_total",
			Help: "Status updates sent to the API server.",
		}),
		statusFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "konglet_status_write_failures_total",
			Help: "Syncs in which some status could not be written.",
		}),
		kongRoutes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_kong_routes",
			Help: "Kong routes in the current configuration.",
		}),
		kongRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "konglet_kong_config_lost_total",
			Help: "Times Kong was seen without konglet's configuration (a restart) and was loaded again.",
		}),
		configCurrent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "konglet_kong_config_current",
			Help: "1 when Kong holds the newest configuration konglet built, else 0 (a failed load leaves Kong serving an older one).",
		}),
		gatewayUsable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "konglet_gateway_usable",
			Help: "Per bound Gateway (--gateway): 1 when konglet can serve it, 0 when it is missing, of a GatewayClass that is not konglet's, or has no usable listener.",
		}, []string{"gateway"}),
		routesTranslated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "konglet_routes_translated_total",
			Help: "Routes of the bound Gateways the translations translated anew; a translation takes the others over from the one before (a route is translated again when it, its backends, its namespace or what every route reads changed).",
		}),
	}
	reg.MustRegister(m.syncDuration, m.pushes, m.configBytes, m.lastSuccess, m.refused, m.kongReachable,
		m.statusWrites, m.statusFailures, m.kongRoutes, m.kongRestarts, m.configCurrent, m.gatewayUsable, m.routesTranslated)
	return m
}
