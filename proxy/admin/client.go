// Package admin speaks to the local Kong's admin API through go-kong: what
// Kong is (GET /), which configuration it holds (GET /status), and loading a
// new one (POST /config).
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kong/go-kong/kong"
)

// Client is a Kong admin API client.
type Client struct {
	kong *kong.Client
	// maxBody is the largest POST /config body sent (0: no limit): Kong's
	// admin API refuses larger ones with 413 after reading them.
	maxBody int
}

// New returns a client for the admin API at baseURL (for example
// http://localhost:8001). Requests time out after timeout; maxBody bounds
// what Load sends (0: no bound).
func New(baseURL string, timeout time.Duration, maxBody int) (*Client, error) {
	c, err := kong.NewClient(kong.String(baseURL), &http.Client{Timeout: timeout, Transport: transport()})
	if err != nil {
		return nil, err
	}
	return &Client{kong: c, maxBody: maxBody}, nil
}

// readBufferSize is the size of the connection's read buffer. Kong
// answers a load with every entity it loaded, about as large as the
// document: with net/http's default of 4 KiB, draining it for 3,300
// routes took about 600 syscalls, a fifth of konglet's CPU in the
// propagation benchmark. (Writes need no larger buffer: the document goes
// to the connection in one write.)
const readBufferSize = 256 << 10

// transport is net/http's default transport with a large read buffer and
// no proxy: the admin API is Kong's, beside konglet, and its requests
// must go nowhere else whatever the Pod's proxy settings.
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.ReadBufferSize = readBufferSize
	return t
}

// Listen is one of Kong's proxy or stream listens.
type Listen struct {
	IP    string `json:"ip"`
	Port  int    `json:"port"`
	SSL   bool   `json:"ssl"`
	HTTP2 bool   `json:"http2"`
	UDP   bool   `json:"udp"` // stream listens only
}

// Info is what GET / tells about the Kong beside us.
type Info struct {
	Version         string
	NodeID          string
	RouterFlavor    string
	ProxyListeners  []Listen
	StreamListeners []Listen
	// PortMaps maps a host (Service) port to the Kong listen port it reaches.
	PortMaps       map[int]int
	EnabledPlugins map[string]bool
	// UntrustedLua is kong.conf's untrusted_lua: whether Kong runs the Lua
	// of serverless plugins ("" when GET / does not say).
	UntrustedLua string
}

// rootAnswer is the part of GET / konglet reads; the listeners are inside
// "configuration", next to the kong.conf properties.
type rootAnswer struct {
	Version string `json:"version"`
	NodeID  string `json:"node_id"`
	Plugins struct {
		AvailableOnServer map[string]json.RawMessage `json:"available_on_server"`
	} `json:"plugins"`
	Configuration struct {
		RouterFlavor    string          `json:"router_flavor"`
		PortMaps        json.RawMessage `json:"port_maps"`
		ProxyListeners  []Listen        `json:"proxy_listeners"`
		StreamListeners []Listen        `json:"stream_listeners"`
		UntrustedLua    string          `json:"untrusted_lua"`
	} `json:"configuration"`
}

// Info reads GET /.
func (c *Client) Info(ctx context.Context) (Info, error) {
	req, err := c.kong.NewRequest(http.MethodGet, "/", nil, nil)
	if err != nil {
		return Info{}, err
	}
	var root rootAnswer
	if _, err := c.kong.Do(ctx, req, &root); err != nil {
		return Info{}, fmt.Errorf("GET /: %w", err)
	}
	info := Info{
		Version:         root.Version,
		NodeID:          root.NodeID,
		RouterFlavor:    root.Configuration.RouterFlavor,
		ProxyListeners:  root.Configuration.ProxyListeners,
		StreamListeners: root.Configuration.StreamListeners,
		PortMaps:        parsePortMaps(root.Configuration.PortMaps),
		EnabledPlugins:  map[string]bool{},
		UntrustedLua:    root.Configuration.UntrustedLua,
	}
	if info.RouterFlavor == "" {
		info.RouterFlavor = "traditional_compatible"
	}
	// available_on_server lists the plugins Kong loaded, that is, the ones
	// the "plugins" property enabled.
	for name := range root.Plugins.AvailableOnServer {
		info.EnabledPlugins[name] = true
	}
	return info, nil
}

// parsePortMaps reads port_maps, which kong.conf gives as a list of
// "host:container" strings (or one comma-separated string).
func parsePortMaps(raw json.RawMessage) map[int]int {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			list = strings.Split(one, ",")
		}
	}
	out := map[int]int{}
	for _, entry := range list {
		host, container, ok := strings.Cut(strings.TrimSpace(entry), ":")
		h, err1 := strconv.Atoi(host)
		c, err2 := strconv.Atoi(container)
		if ok && err1 == nil && err2 == nil {
			out[h] = c
		}
	}
	return out
}

// ConfigHash reads the hash of the configuration Kong holds (GET /status);
// 32 zeros mean none.
func (c *Client) ConfigHash(ctx context.Context) (string, error) {
	st, err := c.kong.Status(ctx)
	if err != nil {
		return "", fmt.Errorf("GET /status: %w", err)
	}
	return st.ConfigurationHash, nil
}

// HasUpstream tells whether the configuration Kong holds has an upstream of
// that name (GET /upstreams/{name}: DB-less Kong serves its entities read-only).
func (c *Client) HasUpstream(ctx context.Context, name string) (bool, error) {
	_, err := c.kong.Upstreams.Get(ctx, kong.String(name))
	if kong.IsNotFoundErr(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("GET /upstreams/%s: %w", name, err)
	}
	return true, nil
}

// LoadError is a refused or failed POST /config.
type LoadError struct {
	StatusCode int
	Message    string
	// RetryAfter is Kong's Retry-After (on 429), zero if none.
	RetryAfter time.Duration
	// Entities are Kong's flattened errors, one per refused entity.
	Entities []EntityError
	// NotSent says that konglet kept the request to itself (too large):
	// StatusCode is then what Kong would have answered.
	NotSent bool
}

func (e *LoadError) Error() string {
	msg := fmt.Sprintf("Kong answered %d to POST /config: %s", e.StatusCode, e.Message)
	if e.NotSent {
		msg = "POST /config not sent: " + e.Message
	}
	if e.StatusCode == http.StatusRequestEntityTooLarge {
		// Kong keeps its last configuration; say what to raise.
		msg += " (the configuration is larger than Kong accepts: raise nginx_admin_client_max_body_size and --max-config-bytes, or lmdb_map_size if Kong says it does not fit in LMDB)"
	}
	return msg
}

// EntityError is one entry of Kong's flattened_errors.
type EntityError struct {
	Type   string   `json:"entity_type"`
	Name   string   `json:"entity_name"`
	ID     string   `json:"entity_id"`
	Tags   []string `json:"entity_tags"`
	Errors []struct {
		Type    string `json:"type"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// Messages joins the entity's errors the way Kong states them.
func (e EntityError) Messages() string {
	msgs := make([]string, 0, len(e.Errors))
	for _, er := range e.Errors {
		if er.Field != "" {
			msgs = append(msgs, er.Field+": "+er.Message)
		} else {
			msgs = append(msgs, er.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// Load sends a declarative config document to Kong as the raw request body,
// labelled YAML (JSON is YAML, and Kong tries cjson first): Kong's
// configuration_hash is then the md5 of our exact bytes, check_hash lets
// Kong skip a config it already has, and the body is the document itself,
// with no copy escaped into a {"config": "..."} string.
func (c *Client) Load(ctx context.Context, document []byte) error {
	if c.maxBody > 0 && len(document) > c.maxBody {
		return &LoadError{StatusCode: http.StatusRequestEntityTooLarge, NotSent: true,
			Message: fmt.Sprintf("the configuration is %d bytes, above --max-config-bytes (%d)", len(document), c.maxBody)}
	}
	params := struct {
		CheckHash     int `url:"check_hash"`
		FlattenErrors int `url:"flatten_errors"`
	}{1, 1}
	req, err := c.kong.NewRequest(http.MethodPost, "/config", params, bytes.NewReader(document))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := c.kong.DoRAW(ctx, req)
	if err != nil {
		return fmt.Errorf("POST /config: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 || resp.StatusCode == http.StatusNotModified {
		// Kong answers 201 with every entity it loaded, as large as the
		// config: drain it (to reuse the connection) without keeping it.
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST /config: reading the answer: %w", err)
	}
	return parseLoadError(resp, raw)
}

func parseLoadError(resp *http.Response, raw []byte) *LoadError {
	e := &LoadError{StatusCode: resp.StatusCode}
	var body struct {
		Message         string          `json:"message"`
		FlattenedErrors json.RawMessage `json:"flattened_errors"`
	}
	if json.Unmarshal(raw, &body) == nil {
		e.Message = body.Message
		// Kong encodes an empty list as {} (an empty Lua table).
		_ = json.Unmarshal(body.FlattenedErrors, &e.Entities)
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(raw))
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

// IsRefusal tells whether err is Kong refusing the configuration itself (as
// opposed to Kong being unreachable, busy or failing).
func IsRefusal(err error) (*LoadError, bool) {
	var le *LoadError
	if errors.As(err, &le) && le.StatusCode == http.StatusBadRequest {
		return le, true
	}
	return nil, false
}
