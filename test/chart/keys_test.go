package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// freeForm are the chart's maps whose keys it passes on rather than reads
// by name, so any key is right there. (A map the chart defaults to {} is
// free-form too: the chart can only copy it.)
var freeForm = map[string]string{
	"env":            "every entry becomes a KONG_<NAME> variable (kong.conf's properties)",
	"podAnnotations": "copied onto the Pod",
}

// unknownKeys lists the key paths of ours that the chart neither has in its
// values.yaml nor reads in its templates by that exact path (optional keys
// such as deployment.sidecarContainers are only comments in its
// values.yaml). Lists are not entered: the chart copies them as they are,
// and the API server's strict validation of the rendered objects checks
// them.
func unknownKeys(ours, chart map[string]any, path string, templates string) []string {
	var out []string
	for k, v := range ours {
		p := strings.TrimPrefix(path+"."+k, ".")
		def, ok := chart[k]
		if !ok && !readByTemplates(templates, p) {
			out = append(out, p)
			continue
		}
		sub, isMap := v.(map[string]any)
		defMap, _ := def.(map[string]any)
		if _, free := freeForm[p]; !isMap || free || ok && len(defMap) == 0 {
			continue
		}
		out = append(out, unknownKeys(sub, defMap, p, templates)...)
	}
	slices.Sort(out)
	return out
}

// readByTemplates: the templates read .Values.<path> itself (not a longer
// key that starts the same).
func readByTemplates(templates, path string) bool {
	return regexp.MustCompile(`\.Values\.` + regexp.QuoteMeta(path) + `($|[^A-Za-z0-9_])`).MatchString(templates)
}

// chartValues are the chart's default values and its templates' text.
func chartValues(t *testing.T) (map[string]any, string) {
	t.Helper()
	needChart(t)
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var templates strings.Builder
	for _, f := range c.Templates {
		templates.Write(f.Data)
		templates.WriteByte('\n')
	}
	return c.Values, templates.String()
}

// TestValuesKeysExistInChart: every key path that deploy/helm/values*.yaml
// set exists in the chart's values.yaml. The chart ignores a key it does
// not know (a misspelt one, or one of another chart version), and
// the setting it was meant to make would silently not happen.
func TestValuesKeysExistInChart(t *testing.T) {
	chart, templates := chartValues(t)
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "helm", "values*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/helm/values*.yaml (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ours map[string]any
		if err := yaml.Unmarshal(b, &ours); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if unknown := unknownKeys(ours, chart, "", templates); len(unknown) > 0 {
			t.Errorf("%s sets keys that Kong chart %s does not have: %s", filepath.Base(f), chartVersion, strings.Join(unknown, ", "))
		}
	}
}

// TestUnknownKeyIsCaught: the check above finds a misspelt key, a key of
// another chart layout, and a misspelt key beside keys the chart only
// reads in its templates; a free-form map takes any key.
func TestUnknownKeyIsCaught(t *testing.T) {
	chart, templates := chartValues(t)
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "helm", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ours map[string]any
	if err := yaml.Unmarshal(b, &ours); err != nil {
		t.Fatal(err)
	}
	ours["proxy"].(map[string]any)["nameOveride"] = "kong-proxy"
	ours["ingressController"].(map[string]any)["deployment"] = map[string]any{"enabled": false}
	ours["deployment"].(map[string]any)["serviceAccount"].(map[string]any)["automount"] = false
	ours["env"].(map[string]any)["any_kong_property"] = "is fine"
	want := []string{"deployment.serviceAccount.automount", "ingressController.deployment", "proxy.nameOveride"}
	if got := unknownKeys(ours, chart, "", templates); !slices.Equal(got, want) {
		t.Errorf("unknown keys %v, want %v", got, want)
	}
}
