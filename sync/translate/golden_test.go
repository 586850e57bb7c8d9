package translate_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

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

// TestGolden translates every testdata/golden/*.yaml input with both router
// flavors and compares config and statuses with the .golden files next to it.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/golden/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, "../../deploy/examples")
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
			name := strings.TrimSuffix(filepath.Base(in), ".yaml")
			t.Run(name+"/"+flavor, func(t *testing.T) {
				paths := []string{in}
				if fi, err := os.Stat(in); err == nil && fi.IsDir() {
					paths, _ = filepath.Glob(filepath.Join(in, "*.yaml"))
				}
				got, err := translate.Translate(loadSnapshot(t, flavor, paths...), nil).YAML()
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata/golden", name+"."+flavor+".golden.yaml")
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
