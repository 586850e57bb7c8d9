package translate_test

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// classYAML is konglet's GatewayClass, which every test input starts with.
const classYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: konglet}
spec: {controllerName: konglet.dev/gateway-controller}
---
`

// publishService is the Service that golden inputs put in front of Kong.
var publishService = types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}

// loadSnapshot reads YAML files into a snapshot for the given router flavor.
func loadSnapshot(t testing.TB, flavor string, paths ...string) *snapshot.Snapshot {
	t.Helper()
	var objs snapshot.Objects
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		err = objs.Decode(f, p)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return objs.Build(snapshot.DefaultControllerName, nil, publishService, testKong(flavor))
}

// testKong is the chart's default Kong plus the stream listens of a Kong
// that serves L4: plain TCP, two ssl ones (Kong reads the server name there,
// then passes through or terminates per route), and UDP.
func testKong(flavor string) snapshot.Kong {
	kong := snapshot.DefaultKong(flavor)
	kong.StreamListens = []snapshot.Listen{{Port: 9000}, {Port: 9001, SSL: true}, {Port: 9443, SSL: true}, {Port: 9053, UDP: true}}
	return kong
}

// goldenDir holds one folder per scenario: input.yaml, and the expected
// output of each router flavor in <flavor>.golden.yaml.
const goldenDir = "testdata/golden"

// goldenInputs are the scenarios' inputs by name, in name order; with
// examples, the deploy/examples scenario too, whose input stays where users
// find it.
func goldenInputs(t testing.TB, examples bool) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range paths {
		out[filepath.Base(filepath.Dir(p))] = []string{p}
	}
	if examples {
		if out["examples"], err = filepath.Glob("../../deploy/examples/*.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestGolden translates every scenario of testdata/golden with both router
// flavors and compares config and statuses with its .golden.yaml files.
func TestGolden(t *testing.T) {
	inputs := goldenInputs(t, true)
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
			t.Run(name+"/"+flavor, func(t *testing.T) {
				got, err := translate.Translate(loadSnapshot(t, flavor, inputs[name]...), nil).YAML()
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join(goldenDir, name, flavor+".golden.yaml")
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./sync/translate -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), string(got)))
				}
			})
		}
	}
}

// lineDiff shows the first differing lines, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + "\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}

// buildSnapshot decodes objects (YAML) into the snapshot a konglet serving
// through the publish Service would take of them, for kong.
func buildSnapshot(t testing.TB, objects string, publish types.NamespacedName, kong snapshot.Kong) *snapshot.Snapshot {
	t.Helper()
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(objects), "test"); err != nil {
		t.Fatal(err)
	}
	return objs.Build(snapshot.DefaultControllerName, nil, publish, kong)
}
