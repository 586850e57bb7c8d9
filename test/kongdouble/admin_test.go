package kongdouble_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kong/go-kong/kong"

	"github.com/konglet/konglet/test/kongdouble"
)

const zeroHash = "00000000000000000000000000000000"

var reUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func validConfig() M {
	return config(M{
		"services": L{svc("echo", "echo-up", M{"name": "echo-route", "paths": L{"/echo"}})},
		"upstreams": L{M{"name": "echo-up", "targets": L{
			M{"target": "10.0.0.2:8080", "weight": 100},
			M{"target": "10.0.0.1:8080", "weight": 50},
		}}},
	})
}

func TestRootDocument(t *testing.T) {
	d := newDouble(t, kongdouble.Options{RouterFlavor: "traditional_compatible"})
	r := get(t, d, "/")
	if r.status != http.StatusOK {
		t.Fatalf("GET / = %d", r.status)
	}
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"version"}, "3.9.0"},
		{[]any{"edition"}, "community"},
		{[]any{"configuration", "database"}, "off"},
		{[]any{"configuration", "router_flavor"}, "traditional_compatible"},
		{[]any{"configuration", "port_maps", 0}, "80:8000"},
		{[]any{"configuration", "port_maps", 1}, "443:8443"},
		{[]any{"configuration", "proxy_listeners", 0, "port"}, 8000.0},
		{[]any{"configuration", "proxy_listeners", 0, "ssl"}, false},
		{[]any{"configuration", "proxy_listeners", 1, "ssl"}, true},
		{[]any{"configuration", "proxy_listeners", 1, "http2"}, true},
		{[]any{"configuration", "proxy_listeners", 1, "proxy_protocol"}, false},
		{[]any{"configuration", "proxy_listeners", 0, "listener"}, "0.0.0.0:8000 reuseport backlog=16384"},
		{[]any{"configuration", "stream_listen", 0}, "off"},
		{[]any{"plugins", "available_on_server", "cors", "priority"}, 2000.0},
		{[]any{"plugins", "available_on_server", "request-transformer", "version"}, "3.9.0"},
	}
	for _, c := range checks {
		if got := lookup(r.body, c.path...); got != c.want {
			t.Errorf("GET / %v = %#v, want %#v", c.path, got, c.want)
		}
	}
	if l, ok := lookup(r.body, "configuration", "stream_listeners").([]any); !ok || len(l) != 0 {
		t.Errorf("stream_listeners = %#v, want []", lookup(r.body, "configuration", "stream_listeners"))
	}
	if id, _ := r.body["node_id"].(string); !reUUID.MatchString(id) {
		t.Errorf("node_id %q is not a UUID", id)
	}
	if l, ok := lookup(r.body, "plugins", "enabled_in_cluster").([]any); !ok || len(l) != 0 {
		t.Errorf("enabled_in_cluster = %#v, want []", lookup(r.body, "plugins", "enabled_in_cluster"))
	}
}

func TestStatusAndReadiness(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	if h := lookup(get(t, d, "/status").body, "configuration_hash"); h != zeroHash {
		t.Fatalf("initial hash %v", h)
	}
	if s := get(t, d, "/status/ready").status; s != http.StatusServiceUnavailable {
		t.Fatalf("ready before load = %d, want 503", s)
	}
	text := string(mustJSON(t, validConfig()))
	if r := postConfigString(t, d, "", text); r.status != http.StatusCreated {
		t.Fatalf("load = %d %s", r.status, r.raw)
	}
	st := get(t, d, "/status").body
	if h := st["configuration_hash"]; h != md5hex(text) {
		t.Errorf("hash %v, want md5 of the config string %s", h, md5hex(text))
	}
	if _, ok := lookup(st, "server", "total_requests").(float64); !ok {
		t.Errorf("status lacks server.total_requests: %v", st)
	}
	if _, ok := st["memory"].(M); !ok {
		t.Errorf("status lacks memory: %v", st)
	}
	if s := get(t, d, "/status/ready").status; s != http.StatusOK {
		t.Fatalf("ready after load = %d", s)
	}
}

func TestConfigHashAndCheckHash(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	text := string(mustJSON(t, validConfig()))

	r := postConfigString(t, d, "?check_hash=1", text)
	if r.status != http.StatusCreated {
		t.Fatalf("first load = %d %s", r.status, r.raw)
	}
	if d.ConfigHash() != md5hex(text) || d.Loads() != 1 || string(d.RawConfig()) != text {
		t.Fatalf("after load: hash %s loads %d raw %q", d.ConfigHash(), d.Loads(), d.RawConfig())
	}
	if len(lookup(r.body, "services").(M)) != 1 || len(lookup(r.body, "targets").(M)) != 2 {
		t.Errorf("201 body lacks the flattened entities: %s", r.raw)
	}
	if _, ok := r.body["workspaces"].(M); !ok {
		t.Errorf("201 body lacks the default workspace: %s", r.raw)
	}

	r = postConfigString(t, d, "?check_hash=1", text)
	if r.status != http.StatusNotModified || len(r.raw) != 0 {
		t.Fatalf("same hash with check_hash=1 = %d %q, want empty 304", r.status, r.raw)
	}
	for _, q := range []string{"", "?check_hash=true", "?check_hash=yes"} {
		if r := postConfigString(t, d, q, text); r.status != http.StatusCreated {
			t.Errorf("check_hash %q: %d, want 201 (only exactly 1 counts)", q, r.status)
		}
	}
	if d.Posts() != 5 || d.Loads() != 4 {
		t.Errorf("posts %d loads %d, want 5 and 4", d.Posts(), d.Loads())
	}

	// Form 1: the config as the body; Kong hashes its own encoding.
	r = postConfig(t, d, "?check_hash=1", validConfig())
	if r.status != http.StatusCreated {
		t.Fatalf("form 1 = %d %s", r.status, r.raw)
	}
	h := d.ConfigHash()
	if h == zeroHash || h == md5hex(string(mustJSON(t, validConfig()))) || len(h) != 32 {
		t.Errorf("form 1 hash %s must be Kong's own, not the body md5", h)
	}
	if r := postConfig(t, d, "?check_hash=1", validConfig()); r.status != http.StatusCreated {
		t.Errorf("form 1 with check_hash = %d, want 201 (never 304)", r.status)
	}

	// Form 3: a raw document.
	raw := string(mustJSON(t, validConfig())) + "\n"
	if r := do(t, http.MethodPost, d.URL()+"/config", "application/yaml", []byte(raw)); r.status != http.StatusCreated {
		t.Fatalf("raw yaml body = %d %s", r.status, r.raw)
	}
	if d.ConfigHash() != md5hex(raw) {
		t.Errorf("raw body hash %s, want %s", d.ConfigHash(), md5hex(raw))
	}
}

func TestEmptyConfigHashesToZeros(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	if r := postConfigString(t, d, "", `{"_format_version":"3.0"}`); r.status != http.StatusCreated {
		t.Fatalf("empty config = %d %s", r.status, r.raw)
	}
	if d.ConfigHash() != zeroHash {
		t.Errorf("empty config hash %s", d.ConfigHash())
	}
	if s := get(t, d, "/status/ready").status; s != http.StatusServiceUnavailable {
		t.Errorf("ready with empty config = %d, want 503", s)
	}
}

func TestRestartForgetsConfig(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	node := get(t, d, "/").body["node_id"]
	postConfigString(t, d, "", string(mustJSON(t, validConfig())))
	if _, ok := d.Route(kongdouble.Request{Host: "a", Path: "/echo"}); !ok {
		t.Fatal("route missing before restart")
	}
	d.Restart()
	if d.ConfigHash() != zeroHash || d.RawConfig() != nil {
		t.Errorf("after restart: hash %s raw %q", d.ConfigHash(), d.RawConfig())
	}
	if _, ok := d.Route(kongdouble.Request{Host: "a", Path: "/echo"}); ok {
		t.Error("route still answers after restart")
	}
	if n := get(t, d, "/").body["node_id"]; n == node {
		t.Errorf("node_id unchanged after restart: %v", n)
	}
	if h := get(t, d, "/status").body["configuration_hash"]; h != zeroHash {
		t.Errorf("status hash after restart %v", h)
	}
}

// TestGetUpstream: DB-less Kong answers GET /upstreams/{name or id} from
// the configuration it holds (konglet looks for its marker this way).
func TestGetUpstream(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	if s := get(t, d, "/upstreams/echo-up").status; s != http.StatusNotFound {
		t.Fatalf("before any config: %d, want 404", s)
	}
	postConfigString(t, d, "", string(mustJSON(t, validConfig())))
	byName := get(t, d, "/upstreams/echo-up")
	if byName.status != http.StatusOK || byName.body["name"] != "echo-up" {
		t.Fatalf("by name: %d %s", byName.status, byName.raw)
	}
	id, _ := byName.body["id"].(string)
	if r := get(t, d, "/upstreams/"+id); r.status != http.StatusOK || r.body["name"] != "echo-up" {
		t.Errorf("by id %q: %d %s", id, r.status, r.raw)
	}
	if s := get(t, d, "/upstreams/other").status; s != http.StatusNotFound {
		t.Errorf("unknown upstream: %d, want 404", s)
	}
	d.Restart()
	if s := get(t, d, "/upstreams/echo-up").status; s != http.StatusNotFound {
		t.Errorf("after a restart: %d, want 404", s)
	}
}

func TestPostConfigBodies(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	text := string(mustJSON(t, validConfig()))
	form := url.Values{"config": {text}}.Encode()
	cases := []struct {
		name, ct, body string
		status         int
		message        string
	}{
		{"empty body", "application/json", "", 400, "expected a declarative configuration"},
		{"no content type, no body", "", "", 400, "expected a declarative configuration"},
		{"bad json", "application/json", "{nope", 400, "Cannot parse JSON body"},
		{"unsupported type", "text/plain", text, 415, ""},
		{"no content type with a body", "", text, 415, ""},
		{"form encoded", "application/x-www-form-urlencoded", form, 201, ""},
		{"json object without _format_version", "application/json", `{"services":[]}`, 400, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, http.MethodPost, d.URL()+"/config", c.ct, []byte(c.body))
			if r.status != c.status {
				t.Fatalf("status %d, want %d (%s)", r.status, c.status, r.raw)
			}
			if c.message != "" && r.body["message"] != c.message {
				t.Errorf("message %v, want %q", r.body["message"], c.message)
			}
		})
	}
	r := postConfigString(t, d, "", "{not json")
	if r.status != 400 || r.body["code"] != 14.0 || !strings.HasPrefix(lookup(r.body, "fields", "error").(string), "failed parsing declarative configuration: ") {
		t.Errorf("unparsable config string: %d %s", r.status, r.raw)
	}
	r = do(t, http.MethodPost, d.URL()+"/config", "application/json", []byte(`{"services":[]}`))
	if lookup(r.body, "fields", "_format_version") != "required field missing" {
		t.Errorf("missing _format_version: %s", r.raw)
	}
	big := make([]byte, 10<<20+1)
	if r := do(t, http.MethodPost, d.URL()+"/config", "application/json", big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("11 MiB body = %d, want 413", r.status)
	}
	if r := get(t, d, "/nowhere"); r.status != 404 {
		t.Errorf("unknown path = %d", r.status)
	}
}

func TestFlattenErrorsFlag(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	bad := config(M{"services": L{M{"name": "s"}}})
	for _, q := range []string{"?flatten_errors=1", "?flatten_errors=true", "?flatten_errors=on", "?flatten_errors=yes", "?flatten_errors=TRUE", "?flatten_errors"} {
		r := postConfig(t, d, q, bad)
		if _, ok := r.body["flattened_errors"]; !ok {
			t.Errorf("%s: no flattened_errors in %s", q, r.raw)
		}
	}
	for _, q := range []string{"", "?flatten_errors=0", "?flatten_errors=no", "?flatten_errors=2"} {
		r := postConfig(t, d, q, bad)
		if _, ok := r.body["flattened_errors"]; ok {
			t.Errorf("%s: unexpected flattened_errors in %s", q, r.raw)
		}
	}
}

func TestFaults(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	text := string(mustJSON(t, validConfig()))

	d.FailNext(http.StatusTooManyRequests, 2)
	for i := 0; i < 2; i++ {
		r := postConfigString(t, d, "", text)
		if r.status != 429 || r.header.Get("Retry-After") != "1" || r.body["message"] != "Currently loading previous configuration" {
			t.Fatalf("attempt %d: %d %v %s", i, r.status, r.header, r.raw)
		}
	}
	if r := postConfigString(t, d, "", text); r.status != http.StatusCreated {
		t.Fatalf("after the failures: %d", r.status)
	}
	for status, msg := range map[int]string{
		500: "An unexpected error occurred",
		503: "Kong currently exiting",
		504: "Timed out while loading configuration",
		413: `Configuration does not fit in LMDB database, consider raising the "lmdb_map_size" config for Kong`,
	} {
		d.FailNext(status, 1)
		if r := postConfigString(t, d, "", text); r.status != status || r.body["message"] != msg {
			t.Errorf("FailNext(%d): %d %s", status, r.status, r.raw)
		}
	}
	if d.Posts() != 7 || d.Loads() != 1 {
		t.Errorf("posts %d loads %d", d.Posts(), d.Loads())
	}

	d.SetDown(true)
	if _, err := http.Get(d.URL() + "/status"); err == nil {
		t.Error("request answered while down")
	}
	d.SetDown(false)
	if r := get(t, d, "/status"); r.status != 200 {
		t.Errorf("after SetDown(false): %d", r.status)
	}

	d.RefuseEntity("route", "echo-route")
	r := postConfigString(t, d, "?flatten_errors=1", text)
	want := flatError{"route", "echo-route", "entity", "", "refused by test"}
	if r.status != 400 || len(flatErrors(t, r)) != 1 || flatErrors(t, r)[0] != want {
		t.Errorf("refused entity: %d %s", r.status, r.raw)
	}
	d.ClearFaults()
	if r := postConfigString(t, d, "", text); r.status != http.StatusCreated {
		t.Errorf("after ClearFaults: %d", r.status)
	}
}

// TestGoKongClient checks the double against the client konglet uses.
func TestGoKongClient(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	ctx := context.Background()
	c, err := kong.NewClient(kong.String(d.URL()), http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := kong.ParseSemanticVersion(kong.VersionFromInfo(root)); v.Major() != 3 || v.Minor() != 9 {
		t.Errorf("version from GET / = %v", kong.VersionFromInfo(root))
	}
	// go-kong sends the document itself (form 1), so Kong computes the
	// hash and check_hash never short-circuits.
	text := mustJSON(t, validConfig())
	for i := 0; i < 2; i++ {
		if err := c.ReloadDeclarativeRawConfig(ctx, strings.NewReader(string(text)), true, true); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	if d.Loads() != 2 || d.ConfigHash() == md5hex(string(text)) || d.ConfigHash() == zeroHash {
		t.Errorf("loads %d hash %s", d.Loads(), d.ConfigHash())
	}
	bad := mustJSON(t, config(M{"services": L{M{"name": "s", "host": "h:80"}}}))
	err = c.ReloadDeclarativeRawConfig(ctx, strings.NewReader(string(bad)), true, true)
	var apiErr *kong.APIError
	if !errors.As(err, &apiErr) || apiErr.Code() != 400 {
		t.Fatalf("bad config error = %v", err)
	}
	if body := string(apiErr.Raw()); !strings.Contains(body, `"flattened_errors"`) || !strings.Contains(body, "must not have a port") {
		t.Errorf("400 body: %s", body)
	}
}
