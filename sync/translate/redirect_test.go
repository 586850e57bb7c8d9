package translate_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// luaChunk is what a per-route Lua chunk must be: konglet's values as
// hexadecimal strings, then fixed code.
var luaChunk = regexp.MustCompile(`^local konglet = \{(?:"[0-9a-f]*"(?:, "[0-9a-f]*")*)?\}\n`)

// checkRouteLua fails unless every chunk of a serverless plugin on a route
// is one of the fixed codes of its plugin and phase with its values: nothing of an
// object is in the code itself.
func checkRouteLua(t *testing.T, cfg *declarative.Config) {
	t.Helper()
	for _, s := range cfg.Services {
		for _, r := range s.Routes {
			for _, p := range r.Plugins {
				if p.Name != "pre-function" && p.Name != "post-function" {
					continue
				}
				for phase, v := range p.Config {
					chunks, _ := v.([]string)
					fixed := translate.RouteLua[p.Name+" "+phase]
					if len(chunks) == 0 || fixed == nil {
						t.Fatalf("route %s: unexpected pre-function phase %s: %v", r.Name, phase, v)
					}
					if p.Name == "pre-function" && phase == "access" {
						if chunks[0] != translate.HostRestoreLua {
							t.Fatalf("route %s: the pre-function does not give the upstream the client's Host first", r.Name)
						}
						chunks = chunks[1:]
					}
					for _, chunk := range chunks {
						head := luaChunk.FindString(chunk)
						if head == "" || !slices.Contains(fixed, chunk[len(head):]) {
							t.Fatalf("route %s: the %s Lua is not fixed code with its values:\n%s", r.Name, phase, chunk)
						}
					}
				}
			}
		}
	}
}

func TestLuaValues(t *testing.T) {
	values := []string{"", `"`, `\`, "]]", "[[", "\n", "\r\n", "\x00", "é日本🎉", `"..os.exit()..--`, strings.Repeat("x", 1<<16), "\xff\xfe"}
	got := translate.LuaValues(values...)
	if luaChunk.FindString(got) != got {
		t.Fatalf("not a table of hexadecimal strings: %.200q", got)
	}
	if translate.LuaValues() != "local konglet = {}\n" {
		t.Fatal("no values")
	}
}

// TestRedirectWithoutLua: where Kong cannot run Lua, redirects use Kong's
// redirect plugin, whose location is fixed, and what it cannot do is
// refused on the route, as is CORS (Kong's cors plugin differs from the
// Gateway API); where it can, every redirect and CORS filter is the Lua.
func TestRedirectWithoutLua(t *testing.T) {
	in := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec: {gatewayClassName: konglet, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: fixed, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: RequestRedirect, requestRedirect: {hostname: example.com, statusCode: 308}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: keeps-host, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {value: /k}}], filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: prefix, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  hostnames: [example.org]
  rules: [{matches: [{path: {value: /p}}], filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /q}}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cors, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {value: /c}}], filters: [{type: CORS, cors: {allowOrigins: ["https://a.example"]}}]}]
`
	for _, lua := range []bool{true, false} {
		kong := snapshot.DefaultKong(snapshot.RouterExpressions)
		if !lua {
			kong.UntrustedLua = "off"
		}
		res := translate.Translate(buildSnapshot(t, in, types.NamespacedName{}, kong), nil)
		checkRouteLua(t, res.Config)
		plugins := map[string]string{}
		for _, s := range res.Config.Services {
			for _, r := range s.Routes {
				// the first: a rule without backends also answers 500
				// (request-termination) after it
				plugins[strings.Split(s.Name, ".")[2]] = r.Plugins[0].Name
			}
		}
		accepted := map[string]string{}
		for ref, parents := range res.Status.Routes {
			accepted[ref.Name] = parents[0].Conditions[0].Message
		}
		if lua {
			for _, name := range []string{"fixed", "keeps-host", "prefix", "cors"} {
				if plugins[name] != "pre-function" || accepted[name] != "" {
					t.Errorf("Lua: %s has %q, %q", name, plugins[name], accepted[name])
				}
			}
			continue
		}
		if plugins["fixed"] != "redirect" || accepted["fixed"] != "" {
			t.Errorf("no Lua: fixed has %q, %q", plugins["fixed"], accepted["fixed"])
		}
		if !strings.Contains(accepted["keeps-host"], "needs exact route hostnames") || !strings.Contains(accepted["prefix"], "pre-function") ||
			!strings.Contains(accepted["cors"], "pre-function") {
			t.Errorf("no Lua: keeps-host %q, prefix %q, cors %q", accepted["keeps-host"], accepted["prefix"], accepted["cors"])
		}
	}
}
