// Package kongdouble is a test double of Kong 3.9's admin API in DB-less
// mode and of its router. It validates declarative configurations as
// strictly as Kong does (same rules, same 400 bodies, flattened errors
// included) and answers which route and upstream Kong would pick for a
// request. See shared/reference/kong-dataplane.md for the contract.
package kongdouble

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Listener is one proxy or stream listener of the simulated Kong.
type Listener struct {
	IP    string
	Port  int
	SSL   bool
	HTTP2 bool // proxy listeners only (not a stream_listen flag)
	UDP   bool // stream listeners only: a "udp" stream_listen entry
}

// Options configures the simulated Kong (the kong.conf values that matter).
// A nil slice means the default; an empty one means none.
type Options struct {
	RouterFlavor    string     // "expressions" (default) | "traditional_compatible" | "traditional"
	ProxyListeners  []Listener // default: 0.0.0.0:8000, 0.0.0.0:8443 ssl http2
	StreamListeners []Listener // default: none
	PortMaps        []string   // kong.conf port_maps, default "80:8000", "443:8443"
	EnabledPlugins  []string   // default: Kong 3.9's bundled plugins
	Version         string     // default "3.9.0"
	UntrustedLua    string     // kong.conf untrusted_lua: "sandbox" (default), "on" or "off"
}

const emptyHash = "00000000000000000000000000000000"

// defaultWorkspaceID is the id Kong gives its default workspace.
const defaultWorkspaceID = "0dc6f45b-8f8d-40d2-a504-473544ee190b"

// maxBodySize is nginx_admin_client_max_body_size (10m).
const maxBodySize = 10 << 20

// Double is a running Kong admin API double.
type Double struct {
	opts     Options
	srv      *httptest.Server
	schemas  *schemas
	portMaps map[int]int // listen port -> host port

	// loadMu serializes loads: the cache and answer have one writer.
	loadMu sync.Mutex
	cache  *loadCache
	answer []byte // the last 201 answer

	mu     sync.Mutex
	nodeID string
	hash   string
	config *loaded
	router *router // the http subsystem's router
	// streamRouter is the stream subsystem's router: Kong builds one per
	// nginx subsystem, each from the routes whose protocols belong to it.
	streamRouter *router
	raw          []byte
	loads        int
	posts        int
	requests     int
	faults       faults
}

// New starts a double listening on 127.0.0.1.
func New(opts Options) *Double {
	if opts.RouterFlavor == "" {
		opts.RouterFlavor = "expressions"
	}
	if opts.ProxyListeners == nil {
		opts.ProxyListeners = []Listener{{IP: "0.0.0.0", Port: 8000}, {IP: "0.0.0.0", Port: 8443, SSL: true, HTTP2: true}}
	}
	if opts.PortMaps == nil {
		opts.PortMaps = []string{"80:8000", "443:8443"}
	}
	if opts.EnabledPlugins == nil {
		for name := range bundledPlugins {
			opts.EnabledPlugins = append(opts.EnabledPlugins, name)
		}
		sort.Strings(opts.EnabledPlugins)
	}
	if opts.Version == "" {
		opts.Version = "3.9.0"
	}
	if opts.UntrustedLua == "" {
		opts.UntrustedLua = "sandbox"
	}
	checkListeners(opts)
	d := &Double{
		opts:     opts,
		schemas:  newSchemas(opts.RouterFlavor, opts.EnabledPlugins),
		portMaps: map[int]int{},
		nodeID:   randomUUID(),
		hash:     emptyHash,
		cache:    &loadCache{},
	}
	for _, pm := range opts.PortMaps {
		hostPort, listenPort, ok := strings.Cut(strings.TrimSpace(pm), ":")
		h, err1 := strconv.Atoi(hostPort)
		l, err2 := strconv.Atoi(listenPort)
		if ok && err1 == nil && err2 == nil {
			d.portMaps[l] = h
		}
	}
	d.srv = httptest.NewServer(d)
	return d
}

// URL is the admin API base URL.
func (d *Double) URL() string { return d.srv.URL }

// Close stops the server.
func (d *Double) Close() { d.srv.Close() }

// ConfigHash is the current configuration_hash (32 zeros when empty).
func (d *Double) ConfigHash() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hash
}

// Loads counts accepted POST /config (201).
func (d *Double) Loads() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loads
}

// Posts counts POST /config received, whatever the answer.
func (d *Double) Posts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.posts
}

// RawConfig is the last accepted declarative document as received: the
// request body, or the `config` string for {"config": "..."} bodies.
func (d *Double) RawConfig() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.raw == nil {
		return nil
	}
	return append([]byte(nil), d.raw...)
}

// Restart simulates a Kong restart: the DB-less config is lost and the
// node gets a new id. Counters and faults are kept.
func (d *Double) Restart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodeID = randomUUID()
	d.hash = emptyHash
	d.config, d.router, d.streamRouter, d.raw = nil, nil, nil, nil
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func message(msg string) map[string]any { return map[string]any{"message": msg} }

// ServeHTTP serves the admin API; a Double can also be mounted elsewhere.
func (d *Double) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.isDown() {
		hangUp(w)
		return
	}
	d.mu.Lock()
	d.requests++
	d.mu.Unlock()
	w.Header().Set("Server", "kong/"+d.opts.Version)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	path := strings.TrimSuffix(r.URL.Path, "/")
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case path == "" && get:
		writeJSON(w, http.StatusOK, d.info())
	case path == "/status" && get:
		writeJSON(w, http.StatusOK, d.status())
	case path == "/status/ready" && get:
		if d.ConfigHash() == emptyHash {
			writeJSON(w, http.StatusServiceUnavailable, message("no configuration available (empty configuration present)"))
			return
		}
		writeJSON(w, http.StatusOK, message("ready"))
	case path == "/config" && r.Method == http.MethodPost:
		d.postConfig(w, r)
	case strings.HasPrefix(path, "/upstreams/") && get:
		d.getUpstream(w, strings.TrimPrefix(path, "/upstreams/"))
	case path == "" || path == "/status" || path == "/status/ready" || path == "/config":
		writeJSON(w, http.StatusMethodNotAllowed, message("Method not allowed"))
	default:
		writeJSON(w, http.StatusNotFound, message("Not found"))
	}
}

// getUpstream answers GET /upstreams/{name or id}, as DB-less Kong's
// read-only admin API does: the entity, or 404.
func (d *Double) getUpstream(w http.ResponseWriter, key string) {
	d.mu.Lock()
	cfg := d.config
	d.mu.Unlock()
	if cfg != nil {
		for id, u := range cfg.entities["upstreams"] {
			if id == key || u["name"] == key {
				writeJSON(w, http.StatusOK, cfg.stamped("upstreams", u))
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, message("Not found"))
}

// listenerString is the "listener" string Kong's conf loader
// (kong/conf_loader/listeners.lua) rebuilds from the flags it recognised,
// in its flag order: http {ssl, http2, proxy_protocol, deferred, bind,
// reuseport, backlog}, stream {udp, ssl, proxy_protocol, bind, reuseport,
// backlog}. The double's listens all carry "reuseport backlog=16384",
// except udp ones: nginx refuses backlog on a udp listen.
func listenerString(l Listener, stream bool) string {
	s := l.IP + ":" + strconv.Itoa(l.Port)
	if stream && l.UDP {
		return s + " udp reuseport"
	}
	if l.SSL {
		s += " ssl"
	}
	if !stream && l.HTTP2 {
		s += " http2"
	}
	return s + " reuseport backlog=16384"
}

// listenersJSON renders proxy_listeners or stream_listeners as GET / shows
// them: ip, port, listener, and one boolean per flag of the subsystem
// (a matched "backlog=N" is keyed by its text, an unmatched one by the
// pattern "backlog=%d+").
func listenersJSON(ls []Listener, stream bool) []any {
	out := make([]any, 0, len(ls))
	for _, l := range ls {
		m := map[string]any{
			"ip": l.IP, "port": l.Port, "ssl": l.SSL, "proxy_protocol": false,
			"bind": false, "reuseport": true, "listener": listenerString(l, stream),
		}
		if stream {
			m["udp"] = l.UDP
		} else {
			m["http2"], m["deferred"] = l.HTTP2, false
		}
		if stream && l.UDP {
			m["backlog=%d+"] = false
		} else {
			m["backlog=16384"] = true
		}
		out = append(out, m)
	}
	return out
}

func listenConf(ls []Listener) []any {
	out := []any{}
	for _, l := range ls {
		s := l.IP + ":" + strconv.Itoa(l.Port)
		if l.UDP {
			out = append(out, s+" udp reuseport")
			continue
		}
		if l.HTTP2 {
			s += " http2"
		}
		if l.SSL {
			s += " ssl"
		}
		out = append(out, s+" reuseport backlog=16384")
	}
	if len(out) == 0 {
		out = append(out, "off")
	}
	return out
}

// checkListeners refuses listens Kong (or nginx) would refuse to start
// with, as Kong would: its conf loader only strips the subsystem's own
// flags, and nginx's stream listen rejects "ssl" with "udp".
func checkListeners(opts Options) {
	for _, l := range opts.ProxyListeners {
		if l.UDP {
			panic("kongdouble: proxy_listen must be of form: [off] | <ip>:<port> [ssl] [http2] [proxy_protocol] [deferred] [bind] [reuseport] [backlog=%d+], [... next entry ...]")
		}
	}
	for _, l := range opts.StreamListeners {
		switch {
		case l.HTTP2:
			panic("kongdouble: stream_listen must be of form: [off] | <ip>:<port> [udp] [ssl] [proxy_protocol] [bind] [reuseport] [backlog=%d+], [... next entry ...]")
		case l.UDP && l.SSL:
			panic(`kongdouble: nginx: "ssl" parameter is incompatible with "udp"`)
		}
	}
}

// info is the GET / document.
func (d *Double) info() map[string]any {
	d.mu.Lock()
	nodeID, cfg := d.nodeID, d.config
	d.mu.Unlock()
	available := map[string]any{}
	loadedPlugins := map[string]any{}
	for _, name := range d.opts.EnabledPlugins {
		available[name] = map[string]any{"version": d.opts.Version, "priority": bundledPlugins[name]}
		loadedPlugins[name] = true
	}
	inCluster := []any{}
	if cfg != nil {
		seen := map[string]bool{}
		for _, id := range cfg.sortedIDs("plugins") {
			name, _ := cfg.entities["plugins"][id]["name"].(string)
			seen[name] = true
		}
		names := make([]string, 0, len(seen))
		for n := range seen {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			inCluster = append(inCluster, n)
		}
	}
	hostname, _ := os.Hostname()
	portMaps := make([]any, len(d.opts.PortMaps))
	for i, p := range d.opts.PortMaps {
		portMaps[i] = p
	}
	plugins := make([]any, len(d.opts.EnabledPlugins))
	for i, p := range d.opts.EnabledPlugins {
		plugins[i] = p
	}
	return map[string]any{
		"version":     d.opts.Version,
		"edition":     "community",
		"tagline":     "Welcome to kong",
		"lua_version": "LuaJIT 2.1.0-20231117",
		"hostname":    hostname,
		"node_id":     nodeID,
		"timers":      map[string]any{"running": 0, "pending": 7},
		"plugins":     map[string]any{"available_on_server": available, "enabled_in_cluster": inCluster},
		"configuration": map[string]any{
			"database":                         "off",
			"role":                             "traditional",
			"router_flavor":                    d.opts.RouterFlavor,
			"port_maps":                        portMaps,
			"proxy_listen":                     listenConf(d.opts.ProxyListeners),
			"stream_listen":                    listenConf(d.opts.StreamListeners),
			"proxy_listeners":                  listenersJSON(d.opts.ProxyListeners, false),
			"stream_listeners":                 listenersJSON(d.opts.StreamListeners, true),
			"admin_listen":                     []any{"127.0.0.1:8001 reuseport backlog=16384"},
			"plugins":                          plugins,
			"loaded_plugins":                   loadedPlugins,
			"lmdb_map_size":                    "2048m",
			"nginx_admin_client_max_body_size": "10m",
			"pg_password":                      "******",
			"untrusted_lua":                    d.opts.UntrustedLua,
		},
	}
}

func (d *Double) status() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]any{
		"memory": map[string]any{
			"workers_lua_vms": []any{map[string]any{"http_allocated_gc": "40.00 MiB", "pid": os.Getpid()}},
			"lua_shared_dicts": map[string]any{
				"kong":          map[string]any{"allocated_slabs": "0.04 MiB", "capacity": "5.00 MiB"},
				"kong_db_cache": map[string]any{"allocated_slabs": "0.80 MiB", "capacity": "128.00 MiB"},
			},
		},
		"server": map[string]any{
			"total_requests": d.requests, "connections_active": 1, "connections_accepted": d.requests,
			"connections_handled": d.requests, "connections_reading": 0, "connections_writing": 1,
			"connections_waiting": 0,
		},
		"configuration_hash": d.hash,
	}
}

// listenPort is the proxy port that accepted req (default: the first
// listener of the right kind).
func (d *Double) listenPort(req Request) int {
	if req.ListenPort != 0 {
		return req.ListenPort
	}
	for _, l := range d.opts.ProxyListeners {
		if l.SSL == req.TLS {
			return l.Port
		}
	}
	if req.TLS {
		return 8443
	}
	return 8000
}

// hostPort is ctx.host_port: the port port_maps maps a listen port to,
// else the listen port.
func (d *Double) hostPort(listen int) int {
	if p := d.portMaps[listen]; p != 0 {
		return p
	}
	return listen
}

func (d *Double) listenIP(port int) string {
	for _, l := range d.opts.ProxyListeners {
		if l.Port == port && l.IP != "0.0.0.0" && l.IP != "::" && l.IP != "[::]" {
			return strings.Trim(l.IP, "[]")
		}
	}
	return "127.0.0.1"
}
