package kongdouble_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// route is a route with paths nested in a service called "s".
func route(name string, fields M) M {
	r := M{"name": name}
	for k, v := range fields {
		r[k] = v
	}
	return r
}

func oneRoute(r M) M { return config(M{"services": L{svc("s", "example.com", r)}}) }

func onePlugin(p M) M {
	return oneRoute(route("r", M{"paths": L{"/"}, "plugins": L{p}}))
}

func fe(entityType, name, field, msg string) flatError {
	kind := "field"
	if field == "" {
		kind = "entity"
	}
	return flatError{entityType, name, kind, field, msg}
}

type validationCase struct {
	name   string
	flavor string
	cfg    M
	want   []flatError
	exact  bool // want lists every flattened error
	prefix bool // messages in want are prefixes
}

func runValidationCases(t *testing.T, cases []validationCase) {
	t.Helper()
	doubles := map[string]*kongdouble.Double{}
	for _, flavor := range []string{"", "traditional_compatible", "traditional"} {
		doubles[flavor] = newDouble(t, kongdouble.Options{RouterFlavor: flavor})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := doubles[c.flavor]
			r := postConfig(t, d, "?flatten_errors=1", c.cfg)
			if r.status != 400 {
				t.Fatalf("status %d, want 400: %s", r.status, r.raw)
			}
			if r.body["code"] != 14.0 || r.body["name"] != "invalid declarative configuration" ||
				!strings.HasPrefix(r.body["message"].(string), "declarative config is invalid: ") {
				t.Errorf("not Kong's error envelope: %s", r.raw)
			}
			got := flatErrors(t, r)
			for _, w := range c.want {
				if !containsFlat(got, w, c.prefix) {
					t.Errorf("missing %+v in %s", w, r.raw)
				}
			}
			if c.exact && len(got) != len(c.want) {
				t.Errorf("got %d flattened errors, want %d: %s", len(got), len(c.want), r.raw)
			}
		})
	}
}

func containsFlat(got []flatError, w flatError, prefix bool) bool {
	for _, g := range got {
		if prefix && g.entityType == w.entityType && g.entityName == w.entityName && g.kind == w.kind &&
			g.field == w.field && strings.HasPrefix(g.message, w.message) {
			return true
		}
		if g == w {
			return true
		}
	}
	return false
}

func TestServiceValidation(t *testing.T) {
	runValidationCases(t, []validationCase{
		{name: "bad name", cfg: config(M{"services": L{M{"name": "bad name!", "host": "h"}}}),
			want: []flatError{fe("service", "bad name!", "name", "invalid value 'bad name!': the only accepted ascii characters are alphanumerics or ., -, _, and ~")}, exact: true},
		{name: "utf-8 name is fine, host with port is not", cfg: config(M{"services": L{M{"name": "café", "host": "h:8080"}}}),
			want: []flatError{fe("service", "café", "host", "must not have a port")}, exact: true},
		{name: "missing host", cfg: config(M{"services": L{M{"name": "s"}}}),
			want: []flatError{fe("service", "s", "host", "required field missing")}, exact: true},
		{name: "bad host", cfg: config(M{"services": L{M{"name": "s", "host": "exa mple"}}}),
			want: []flatError{fe("service", "s", "host", "invalid value: exa mple")}},
		{name: "protocol", cfg: config(M{"services": L{M{"name": "s", "host": "h", "protocol": "ftp"}}}),
			want: []flatError{fe("service", "s", "protocol", "expected one of: grpc, grpcs, http, https, tcp, tls, tls_passthrough, udp")}},
		{name: "port range", cfg: config(M{"services": L{M{"name": "s", "host": "h", "port": 70000}}}),
			want: []flatError{fe("service", "s", "port", "value should be between 0 and 65535")}},
		{name: "port type", cfg: config(M{"services": L{M{"name": "s", "host": "h", "port": "80"}}}),
			want: []flatError{fe("service", "s", "port", "expected an integer")}},
		{name: "path start", cfg: config(M{"services": L{M{"name": "s", "host": "h", "path": "api"}}}),
			want: []flatError{fe("service", "s", "path", "should start with: /")}},
		{name: "path empty segment", cfg: config(M{"services": L{M{"name": "s", "host": "h", "path": "/a//b"}}}),
			want: []flatError{fe("service", "s", "path", "must not have empty segments")}},
		{name: "path with tcp", cfg: config(M{"services": L{M{"name": "s", "host": "h", "protocol": "tcp", "path": "/a"}}}),
			want: []flatError{
				fe("service", "s", "path", "value must be null"),
				fe("service", "s", "", "failed conditional validation given value of field 'protocol'"),
			}, exact: true},
		{name: "timeouts and retries", cfg: config(M{"services": L{M{"name": "s", "host": "h", "connect_timeout": 0, "read_timeout": 2147483647, "retries": 32768}}}),
			want: []flatError{
				fe("service", "s", "connect_timeout", "value should be between 1 and 2147483646"),
				fe("service", "s", "read_timeout", "value should be between 1 and 2147483646"),
				fe("service", "s", "retries", "value should be between 0 and 32767"),
			}, exact: true},
		{name: "tls_verify only for https", cfg: config(M{"services": L{M{"name": "s", "host": "h", "tls_verify": true}}}),
			want: []flatError{fe("service", "s", "tls_verify", "value must be null")}},
		{name: "unknown field", cfg: config(M{"services": L{M{"name": "s", "host": "h", "hostname": "x"}}}),
			want: []flatError{fe("service", "s", "hostname", "unknown field")}, exact: true},
		{name: "tags", cfg: config(M{"services": L{M{"name": "s", "host": "h", "tags": L{"ok", "a,b", "c/d"}}}}),
			want: []flatError{
				fe("service", "s", "tags.2", "invalid tag 'a,b': expected printable ascii (except `,` and `/`) or valid utf-8 sequences"),
				fe("service", "s", "tags.3", "invalid tag 'c/d': expected printable ascii (except `,` and `/`) or valid utf-8 sequences"),
			}, exact: true},
		{name: "url shorthand", cfg: config(M{"services": L{M{"name": "s", "url": "https://h:99999/p"}}}),
			want: []flatError{fe("service", "s", "port", "value should be between 0 and 65535")}, exact: true},
	})
}

func TestRouteValidation(t *testing.T) {
	paths := M{"paths": L{"/"}}
	runValidationCases(t, []validationCase{
		{name: "nothing to match (expressions)", cfg: oneRoute(route("r", nil)),
			want: []flatError{fe("route", "r", "", "must set one of 'methods', 'hosts', 'headers', 'paths', 'snis', 'expression' when 'protocols' is 'https'")}, exact: true},
		{name: "nothing to match (compat)", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"protocols": L{"http"}})),
			want: []flatError{fe("route", "r", "", "must set one of 'methods', 'hosts', 'headers', 'paths' when 'protocols' is 'http'")}, exact: true},
		{name: "protocol groups", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"http", "tcp"}})),
			want: []flatError{fe("route", "r", "protocols", "these sets are mutually exclusive: ('http', 'https'), ('tcp', 'tls', 'udp')")}, exact: true},
		{name: "unknown protocol", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"http", "ftp"}})),
			want: []flatError{fe("route", "r", "protocols.2", "expected one of: grpc, grpcs, http, https, tcp, tls, tls_passthrough, udp")}, exact: true},
		{name: "only unknown protocols", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"ftp"}})),
			want: []flatError{fe("route", "r", "protocols", "unknown type: ftp")}, exact: true},
		{name: "methods", cfg: oneRoute(route("r", M{"methods": L{"get"}})),
			want: []flatError{fe("route", "r", "methods.1", "invalid value: get")}, exact: true},
		{name: "hosts wildcards", cfg: oneRoute(route("r", M{"hosts": L{"*.a.*", "a.*.com", "ok.*", "*.ok.com", "bad_host!", "h:99999"}})),
			want: []flatError{
				fe("route", "r", "hosts.1", "invalid wildcard: must have at most one wildcard"),
				fe("route", "r", "hosts.2", "invalid wildcard: must be placed at leftmost or rightmost label"),
				fe("route", "r", "hosts.5", "invalid hostname: bad_host!"),
				fe("route", "r", "hosts.6", "invalid port number"),
			}, exact: true},
		{name: "paths", cfg: oneRoute(route("r", M{"paths": L{"/ok", "noslash", "/a//b", "/a/../b", "/%7e", "/%zz"}})),
			want: []flatError{
				fe("route", "r", "paths.2", "should start with: / (fixed path) or ~/ (regex path)"),
				fe("route", "r", "paths.3", "must not have empty segments"),
				fe("route", "r", "paths.4", "non-normalized path, consider use '/b' instead"),
				fe("route", "r", "paths.5", "non-normalized path, consider use '/~' instead"),
				fe("route", "r", "paths.6", "invalid url-encoded value: '%zz'"),
			}, exact: true},
		{name: "regex path must compile", cfg: oneRoute(route("r", M{"paths": L{"~/(unclosed"}})),
			want: []flatError{fe("route", "r", "paths.1", "invalid regex: '/(unclosed' (PCRE returned: ")}, prefix: true, exact: true},
		{name: "pcre lookahead passes PCRE but not the ATC router", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"paths": L{"~/(?=a)"}})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: ")}, prefix: true, exact: true},
		{name: "headers", cfg: oneRoute(route("r", M{"headers": M{"Host": L{"x"}}})),
			want: []flatError{fe("route", "r", "headers", "cannot contain 'host' header, which must be specified in the 'hosts' attribute")}, exact: true},
		{name: "header name", cfg: oneRoute(route("r", M{"headers": M{"bad header": L{"x"}}})),
			want: []flatError{fe("route", "r", "headers", "bad header name 'bad header', allowed characters are A-Z, a-z, 0-9, '_', and '-'")}, exact: true},
		{name: "snis need tls", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"http"}, "snis": L{"a.com"}})),
			want: []flatError{
				fe("route", "r", "snis", "length must be 0"),
				fe("route", "r", "", "'snis' can only be set when 'protocols' is 'grpcs', 'https', 'tls' or 'tls_passthrough'"),
			}, exact: true},
		{name: "redirect code and path_handling", cfg: oneRoute(route("r", M{"paths": L{"/"}, "https_redirect_status_code": 303, "path_handling": "v2", "regex_priority": 1.5})),
			want: []flatError{
				fe("route", "r", "https_redirect_status_code", "expected one of: 426, 301, 302, 307, 308"),
				fe("route", "r", "path_handling", "expected one of: v0, v1"),
				fe("route", "r", "regex_priority", "expected an integer"),
			}, exact: true},
		{name: "expression is unknown outside expressions", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"paths": L{"/"}, "expression": `http.path == "/"`, "priority": 1})),
			want: []flatError{fe("route", "r", "expression", "unknown field"), fe("route", "r", "priority", "unknown field")}, exact: true},
		{name: "expression is unknown in traditional", flavor: "traditional", cfg: oneRoute(route("r", M{"expression": `http.path == "/"`})),
			want: []flatError{fe("route", "r", "expression", "unknown field")}},
		{name: "priority range", cfg: oneRoute(route("r", M{"expression": `http.path == "/"`, "priority": 70368744177664.0})),
			want: []flatError{fe("route", "r", "priority", "value should be between 0 and 70368744177663")}, exact: true},
		{name: "expression with traditional fields", cfg: oneRoute(route("r", M{"expression": `http.path == "/"`, "paths": L{"/"}})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: cannot set 'expression' with 'methods', 'hosts', 'paths', 'headers', 'snis', 'sources' or 'destinations' simultaneously")}, exact: true},
		{name: "expression with regex_priority", cfg: oneRoute(route("r", M{"expression": `http.path == "/"`, "regex_priority": 3})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: cannot set 'regex_priority' with 'expression' simultaneously")}, exact: true},
		{name: "priority with traditional fields", cfg: oneRoute(route("r", M{"paths": L{"/"}, "priority": 3})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: cannot set 'priority' with 'methods', 'hosts', 'paths', 'headers', 'snis', 'sources' or 'destinations' simultaneously")}, exact: true},
		{name: "expression syntax", cfg: oneRoute(route("r", M{"expression": `http.path == "/" &&`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation:  --> 1:20\n  |\n1 | http.path == \"/\" &&\n  |                    ^---\n  |\n  = expected term")}, exact: true},
		{name: "expression unknown field", cfg: oneRoute(route("r", M{"expression": `http.pth == "/"`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: Unknown LHS field")}, exact: true},
		{name: "expression type mismatch", cfg: oneRoute(route("r", M{"expression": `http.path == 1`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: Type mismatch between the LHS and RHS values of predicate")}},
		{name: "expression lower on int", cfg: oneRoute(route("r", M{"expression": `lower(net.dst.port) == 80`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: lower-case transformation function only supported with String type fields")}},
		{name: "expression in on strings", cfg: oneRoute(route("r", M{"expression": `http.host in "a"`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: In/NotIn operators only supports IP in CIDR")}},
		{name: "expression bad regex", cfg: oneRoute(route("r", M{"expression": `http.path ~ "(a"`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation:  --> 1:13")}, prefix: true},
		{name: "expression segments", cfg: oneRoute(route("r", M{"expression": `http.path.segments.2_1 == "a"`})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: illformed http.path.segments.* field")}},
		{name: "expression header regex from compat", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"headers": M{"x-v": L{"~*(v"}}})),
			want: []flatError{fe("route", "r", "", "Router Expression failed validation: ")}, prefix: true},
		{name: "grpc", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"grpc"}, "strip_path": true, "methods": L{"GET"}})),
			want: []flatError{
				fe("route", "r", "strip_path", "cannot set 'strip_path' when 'protocols' is 'grpc' or 'grpcs'"),
				fe("route", "r", "methods", "cannot set 'methods' when 'protocols' is 'grpc' or 'grpcs'"),
			}, exact: true},
		{name: "stream", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"paths": L{"/"}, "protocols": L{"tcp"}})),
			want: []flatError{
				fe("route", "r", "paths", "cannot set 'paths' when 'protocols' is 'tcp', 'tls', 'tls_passthrough' or 'udp'"),
				fe("route", "r", "", "must set one of 'sources', 'destinations', 'snis' when 'protocols' is 'tcp', 'tls' or 'udp'"),
			}, exact: true},
		{name: "sources on http (compat)", flavor: "traditional_compatible", cfg: oneRoute(route("r", M{"paths": L{"/"}, "sources": L{M{"ip": "10.0.0.0/8"}}})),
			want: []flatError{fe("route", "r", "sources", "cannot set 'sources' when 'protocols' is 'http' or 'https'")}, exact: true},
		{name: "nested route may not name its service", cfg: config(M{"services": L{svc("s", "h", route("r", M{"paths": L{"/"}, "service": "nope"}), route("bad", M{"methods": L{"x"}}))}}),
			want: []flatError{
				fe("route", "r", "service", "value must be null"),
				fe("route", "bad", "methods.1", "invalid value: x"),
			}, exact: true},
		{name: "duplicate nested route names are not flattened", cfg: config(M{"services": L{svc("a", "h", route("r", paths)), svc("b", "h", route("r", paths))}})},
	})
}

func TestUpstreamTargetCertificateValidation(t *testing.T) {
	cert, key := certPair(t, "a.example.com")
	otherCert, _ := certPair(t, "b.example.com")
	runValidationCases(t, []validationCase{
		{name: "upstream name", cfg: config(M{"upstreams": L{M{"name": "10.0.0.1"}, M{"name": "up:80"}, M{"name": "bad name"}}}),
			want: []flatError{
				fe("upstream", "10.0.0.1", "name", "Invalid name ('10.0.0.1'); no ip addresses allowed"),
				fe("upstream", "up:80", "name", "Invalid name ('up:80'); no port allowed"),
				fe("upstream", "bad name", "name", "Invalid name ('bad name'); must be a valid hostname"),
			}, exact: true},
		{name: "upstream slots and algorithm", cfg: config(M{"upstreams": L{M{"name": "u", "slots": 5, "algorithm": "random"}}}),
			want: []flatError{
				fe("upstream", "u", "slots", "value should be between 10 and 65536"),
				fe("upstream", "u", "algorithm", "expected one of: consistent-hashing, least-connections, round-robin, latency"),
			}, exact: true},
		{name: "upstream hashing", cfg: config(M{"upstreams": L{M{"name": "u", "hash_on": "header"}}}),
			want: []flatError{
				fe("upstream", "u", "hash_on_header", "required field missing"),
				fe("upstream", "u", "", "failed conditional validation given value of field 'hash_on'"),
			}, exact: true},
		{name: "targets", cfg: config(M{"upstreams": L{M{"name": "u", "targets": L{M{"target": "bad target!"}, M{"target": "10.0.0.1:8080", "weight": 70000}}}}}),
			want: []flatError{
				fe("target", "", "target", "Invalid target ('bad target!'); not a valid hostname or ip address"),
				fe("target", "", "weight", "value should be between 0 and 65535"),
			}, exact: true},
		{name: "top-level target needs its upstream", cfg: config(M{"targets": L{M{"target": "10.0.0.1"}}}),
			want: []flatError{fe("target", "", "upstream", "required field missing")}, exact: true},
		{name: "certificate parsing", cfg: config(M{"certificates": L{M{"cert": "garbage", "key": "garbage"}}}),
			want: []flatError{
				fe("certificate", "", "cert", "invalid certificate: "),
				fe("certificate", "", "key", "invalid key: "),
			}, prefix: true, exact: true},
		{name: "certificate mismatch", cfg: config(M{"certificates": L{M{"cert": otherCert, "key": key, "snis": L{M{"name": "b.example.com"}}}}}),
			want: []flatError{fe("certificate", "", "", "certificate does not match key")}, exact: true},
		{name: "sni name", cfg: config(M{"certificates": L{M{"cert": cert, "key": key, "snis": L{M{"name": "10.0.0.1"}, M{"name": "*.a.*"}, M{"name": "a.*.b"}}}}}),
			want: []flatError{
				fe("sni", "10.0.0.1", "name", "must not be an IP"),
				fe("sni", "*.a.*", "name", "only one wildcard must be specified"),
				fe("sni", "a.*.b", "name", "wildcard must be leftmost or rightmost character"),
			}, exact: true},
		{name: "duplicate sni names across certificates stay in fields", cfg: config(M{"certificates": L{
			M{"cert": cert, "key": key, "snis": L{M{"name": "a.example.com"}}},
			M{"cert": cert, "key": key, "snis": L{M{"name": "a.example.com"}}},
		}})},
	})
}

func TestPluginValidation(t *testing.T) {
	runValidationCases(t, []validationCase{
		{name: "not enabled", cfg: onePlugin(M{"name": "no-such-plugin", "config": M{"x": 1}}),
			want: []flatError{fe("plugin", "no-such-plugin", "name", "plugin 'no-such-plugin' not enabled; add it to the 'plugins' configuration property")}, exact: true},
		{name: "request-transformer", cfg: onePlugin(M{"name": "request-transformer", "config": M{
			"foo":    1,
			"add":    M{"headers": L{"NoColon", "X-Ok:v", "bad name:v"}, "querystring": L{"q"}},
			"remove": M{"headers": "X-A"},
		}}),
			want: []flatError{
				fe("plugin", "request-transformer", "config.foo", "unknown field"),
				fe("plugin", "request-transformer", "config.add.headers.1", "invalid value: NoColon"),
				fe("plugin", "request-transformer", "config.add.headers.3", "'bad name' is not a valid header"),
				fe("plugin", "request-transformer", "config.add.querystring.1", "key 'q' has no value"),
				fe("plugin", "request-transformer", "config.remove.headers", "expected an array"),
			}, exact: true},
		{name: "response-transformer", cfg: onePlugin(M{"name": "response-transformer", "config": M{"add": M{"json_types": L{"int"}, "json": L{"novalue"}}}}),
			want: []flatError{
				fe("plugin", "response-transformer", "config.add.json_types.1", "expected one of: boolean, number, string"),
				fe("plugin", "response-transformer", "config.add.json.1", "invalid value: novalue"),
			}, exact: true},
		{name: "request-termination", cfg: onePlugin(M{"name": "request-termination", "config": M{"status_code": 99}}),
			want: []flatError{fe("plugin", "request-termination", "config.status_code", "value should be between 100 and 599")}, exact: true},
		{name: "request-termination message and body", cfg: onePlugin(M{"name": "request-termination", "config": M{"message": "m", "body": "b"}}),
			want: []flatError{fe("plugin", "request-termination", "config", "message cannot be used with content_type or body")}, exact: true},
		{name: "redirect", cfg: onePlugin(M{"name": "redirect", "config": M{"status_code": 301}}),
			want: []flatError{fe("plugin", "redirect", "config.location", "required field missing")}, exact: true},
		{name: "redirect location", cfg: onePlugin(M{"name": "redirect", "config": M{"location": "example.com/x", "keep_incoming_path": "yes"}}),
			want: []flatError{
				fe("plugin", "redirect", "config.location", "missing host in url"),
				fe("plugin", "redirect", "config.keep_incoming_path", "expected a boolean"),
			}, exact: true},
		{name: "cors", cfg: onePlugin(M{"name": "cors", "config": M{"methods": L{"GET", "FOO"}, "origins": L{"*", "("}, "credentials": "yes", "max_age": "1"}}),
			want: []flatError{
				fe("plugin", "cors", "config.methods.2", "expected one of: GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS, TRACE, CONNECT"),
				fe("plugin", "cors", "config.origins.2", "'(' is not a valid regex"),
				fe("plugin", "cors", "config.credentials", "expected a boolean"),
				fe("plugin", "cors", "config.max_age", "expected a number"),
			}, exact: true},
		{name: "plugin protocols", cfg: onePlugin(M{"name": "cors", "protocols": L{"tcp"}}),
			want: []flatError{fe("plugin", "cors", "protocols.1", "expected one of: grpc, grpcs, http, https")}, exact: true},
	})
}

func TestPluginNotEnabledWithCustomList(t *testing.T) {
	d := newDouble(t, kongdouble.Options{EnabledPlugins: []string{"request-transformer"}})
	r := postConfig(t, d, "?flatten_errors=1", onePlugin(M{"name": "cors"}))
	want := fe("plugin", "cors", "name", "plugin 'cors' not enabled; add it to the 'plugins' configuration property")
	if got := flatErrors(t, r); len(got) != 1 || got[0] != want {
		t.Errorf("got %+v", got)
	}
	if _, ok := lookup(get(t, d, "/").body, "plugins", "available_on_server", "cors").(M); ok {
		t.Error("cors listed as available")
	}
}

// TestErrorShapes checks Kong's `fields` nesting and what flattening keeps,
// including the quirks of kong/db/errors.lua.
func TestErrorShapes(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	paths := M{"paths": L{"/"}}
	cases := []struct {
		name       string
		cfg        M
		fields     any // expected `fields` without flatten_errors
		flatFields any // expected `fields` with flatten_errors=1
		flatCount  int
	}{
		{
			name:       "sparse arrays padded with null",
			cfg:        config(M{"services": L{M{"name": "ok", "host": "h"}, M{"name": "bad", "host": "h:1"}}}),
			fields:     M{"services": L{nil, M{"host": "must not have a port"}}},
			flatFields: M{},
			flatCount:  1,
		},
		{
			name:       "entity errors under @entity",
			cfg:        config(M{"services": L{M{"name": "s", "host": "h", "protocol": "grpc", "path": "/p"}}}),
			fields:     M{"services": L{M{"path": "value must be null", "@entity": L{"failed conditional validation given value of field 'protocol'"}}}},
			flatFields: M{},
			flatCount:  2,
		},
		{
			name:       "duplicate names vanish when flattened",
			cfg:        config(M{"services": L{svc("a", "h"), svc("a", "h")}}),
			fields:     M{"services": L{nil, "uniqueness violation: 'services' entity with name set to 'a' already declared"}},
			flatFields: M{},
		},
		{
			name:       "duplicate nested names stay under their type",
			cfg:        config(M{"services": L{svc("a", "h", route("r", paths)), svc("b", "h", route("r", paths))}}),
			fields:     M{"routes": L{"uniqueness violation: 'routes' entity with name set to 'r' already declared"}},
			flatFields: M{"routes": L{"uniqueness violation: 'routes' entity with name set to 'r' already declared"}},
		},
		{
			name: "duplicate targets",
			cfg:  config(M{"upstreams": L{M{"name": "u", "targets": L{M{"target": "10.0.0.1:80"}, M{"target": "10.0.0.1:80"}}}}}),
			fields: M{"upstreams": L{M{"targets": L{nil, "uniqueness violation: 'targets' entity with primary key set to '" +
				targetID("u", "10.0.0.1:80") + "' already declared"}}}},
			flatFields: M{},
		},
		{
			name: "duplicate plugins two levels deep are reported under routes",
			cfg:  oneRoute(route("r", M{"paths": L{"/"}, "plugins": L{M{"name": "cors"}, M{"name": "cors"}}})),
			fields: M{"routes": L{M{"plugins": L{nil, "uniqueness violation: 'plugins' entity with primary key set to '" +
				pluginID("cors", routeID("r")) + "' already declared"}}}},
			flatFields: M{"routes": L{M{"plugins": L{nil, "uniqueness violation: 'plugins' entity with primary key set to '" +
				pluginID("cors", routeID("r")) + "' already declared"}}}},
		},
		{
			name:       "invalid references are keyed by name and vanish when flattened",
			cfg:        config(M{"routes": L{M{"name": "r", "paths": L{"/"}, "service": "nope"}}}),
			fields:     M{"routes": M{"r": L{"invalid reference 'service: nope' (no such entry in 'services')"}}},
			flatFields: M{},
		},
		{
			name:       "unresolved references after another error",
			cfg:        config(M{"routes": L{M{"name": "r", "paths": L{"/"}, "service": "nope"}}, "services": L{M{"name": "s"}}}),
			fields:     M{"routes": L{M{"service": M{"id": "missing primary key"}}}, "services": L{M{"host": "required field missing"}}},
			flatFields: M{},
			flatCount:  2,
		},
		{
			name:       "top-level errors are not flattened",
			cfg:        M{"_format_version": "4.0", "foo": 1},
			fields:     M{"_format_version": "expected one of: 1.1, 2.1, 3.0", "foo": "unknown field"},
			flatFields: M{"_format_version": "expected one of: 1.1, 2.1, 3.0", "foo": "unknown field"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := postConfig(t, d, "", c.cfg)
			if r.status != 400 || !reflect.DeepEqual(r.body["fields"], c.fields) {
				t.Errorf("fields = %s\nwant %s", mustJSON(t, r.body["fields"]), mustJSON(t, c.fields))
			}
			if _, ok := r.body["flattened_errors"]; ok {
				t.Error("flattened_errors without the flag")
			}
			r = postConfig(t, d, "?flatten_errors=1", c.cfg)
			if !reflect.DeepEqual(r.body["fields"], c.flatFields) {
				t.Errorf("flattened fields = %s\nwant %s", mustJSON(t, r.body["fields"]), mustJSON(t, c.flatFields))
			}
			got := flatErrors(t, r)
			if len(got) != c.flatCount {
				t.Errorf("%d flattened errors, want %d: %s", len(got), c.flatCount, r.raw)
			}
			if c.flatCount == 0 && fmt.Sprint(r.body["flattened_errors"]) != "map[]" {
				t.Errorf("empty flattened_errors must be {}: %s", r.raw)
			}
		})
	}
}

func TestFlattenedEntityShape(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	svcID := "5c0e4f6d-7a0c-4f57-8f6a-0f4f2d4f9a11"
	cfg := config(M{"services": L{M{"id": svcID, "name": "s", "host": "h", "tags": L{"k8s-name:foo", "k8s-kind:HTTPRoute"},
		"routes": L{M{"name": "r", "tags": L{"k8s-name:foo"}, "methods": L{"get"},
			"plugins": L{M{"name": "cors", "config": M{"credentials": 1}}}}}}}})
	r := postConfig(t, d, "?flatten_errors=1", cfg)
	list := r.body["flattened_errors"].([]any)
	var routeEntry, pluginEntry M
	for _, e := range list {
		switch e.(M)["entity_type"] {
		case "route":
			routeEntry = e.(M)
		case "plugin":
			pluginEntry = e.(M)
		}
	}
	if routeEntry == nil || pluginEntry == nil || len(list) != 2 {
		t.Fatalf("flattened: %s", r.raw)
	}
	if !reflect.DeepEqual(routeEntry["entity_tags"], L{"k8s-name:foo"}) {
		t.Errorf("entity_tags %v", routeEntry["entity_tags"])
	}
	entity := routeEntry["entity"].(M)
	if _, has := entity["plugins"]; has {
		t.Errorf("nested children must be removed from the entity: %v", entity)
	}
	if !reflect.DeepEqual(entity["service"], M{"id": svcID}) {
		t.Errorf("the parent's key is added to the nested entity: %v", entity)
	}
	if _, has := routeEntry["entity_id"]; has {
		t.Errorf("entity_id only when the input had one: %v", routeEntry)
	}
	if e := pluginEntry["errors"].([]any)[0].(M); e["field"] != "config.credentials" || e["message"] != "expected a boolean" {
		t.Errorf("plugin errors %v", pluginEntry["errors"])
	}
}

func TestValidConfigsAccepted(t *testing.T) {
	cert, key := certPair(t, "a.example.com")
	cases := []struct {
		name   string
		flavor string
		cfg    M
	}{
		{"top-level entities referencing by name", "", config(M{
			"services":     L{M{"name": "s", "host": "u"}},
			"routes":       L{M{"name": "r", "paths": L{"/"}, "service": "s"}},
			"upstreams":    L{M{"name": "u"}},
			"targets":      L{M{"target": "10.0.0.1:80", "upstream": "u"}},
			"plugins":      L{M{"name": "cors", "route": "r"}, M{"name": "cors", "service": "s"}, M{"name": "cors"}},
			"certificates": L{M{"id": "11111111-1111-4111-8111-111111111111", "cert": cert, "key": key}},
			"snis":         L{M{"name": "a.example.com", "certificate": "11111111-1111-4111-8111-111111111111"}},
		})},
		{"comments and transform", "", M{"_format_version": "2.1", "_transform": false, "_comment": "x",
			"services": L{M{"name": "s", "host": "h", "_comment": "y", "_ignore": L{1}, "routes": L{M{"name": "r", "hosts": L{"*.a.com", "b.*", "c.com:8080"}}}}}}},
		{"all konglet plugins", "", oneRoute(route("r", M{"expression": `http.path ^= "/a" && lower(http.host) == "a.com"`, "priority": 10, "plugins": L{
			M{"name": "request-transformer", "config": M{"add": M{"headers": L{"x-a:1"}}, "replace": M{"uri": "/b"}, "remove": M{"headers": L{"x-b"}}}},
			M{"name": "response-transformer", "config": M{"append": M{"headers": L{"x-c:2"}}}},
			M{"name": "request-termination", "config": M{"status_code": 418, "body": "tea", "content_type": "text/plain"}},
			M{"name": "redirect", "config": M{"location": "https://example.com/x", "status_code": 302}},
			M{"name": "cors", "config": M{"origins": L{"https://a.com", "~^https://.*\\.b\\.com$"}}},
		}}))},
		{"grpc and stream routes", "traditional_compatible", config(M{"services": L{
			M{"name": "g", "host": "h", "protocol": "grpc", "routes": L{M{"name": "gr", "protocols": L{"grpc"}, "paths": L{"/pkg.Svc/"}}}},
			M{"name": "t", "host": "h", "protocol": "tcp", "routes": L{M{"name": "tr", "protocols": L{"tcp"}, "destinations": L{M{"port": 9000}}}}},
		}})},
		{"traditional flavor", "traditional", oneRoute(route("r", M{"paths": L{"~/(?=x)"}, "snis": L{"a.com"}}))},
		// Pass 1 refuses the parent reference, pass 2 resolves it, so Kong
		// accepts the config.
		{"nested route naming its own service", "", oneRoute(route("r", M{"paths": L{"/"}, "service": "s"}))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDouble(t, kongdouble.Options{RouterFlavor: c.flavor})
			if r := postConfig(t, d, "?flatten_errors=1", c.cfg); r.status != 201 {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
		})
	}
}
