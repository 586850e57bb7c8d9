package main

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

type filesFlag []string

func (f *filesFlag) String() string     { return strings.Join(*f, ",") }
func (f *filesFlag) Set(v string) error { *f = append(*f, v); return nil }

func runTranslate(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("konglet translate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var files filesFlag
	var gateways namesFlag
	var publish nameFlag
	fset.Var(&files, "f", "a YAML file or a folder of them (repeatable; - for standard input)")
	fset.Var(&gateways, "gateway", "bind to this Gateway, namespace/name (repeatable; default: every Gateway of the class)")
	fset.Var(&publish, "publish-service", "the Service in front of Kong, namespace/name, if the files contain it")
	router := fset.String("router", snapshot.RouterExpressions, "Kong router flavor: expressions or traditional_compatible")
	controller := fset.String("controller-name", snapshot.DefaultControllerName, "the GatewayClass controllerName konglet owns")
	serviceUpstream := fset.Bool("service-upstream", false, "target Services by DNS name instead of Pod IPs (for a mesh)")
	output := fset.String("o", "yaml", "output format: yaml or json")
	if err := parseFlags(fset, args); err != nil {
		return 2
	}
	if len(files) == 0 || (*router != snapshot.RouterExpressions && *router != snapshot.RouterTraditionalCompat) ||
		(*output != "yaml" && *output != "json") {
		fmt.Fprintln(stderr, "konglet translate: need -f, --router expressions|traditional_compatible, -o yaml|json")
		fset.Usage()
		return 2
	}
	var objs snapshot.Objects
	for _, f := range files {
		if err := decodePath(&objs, f); err != nil {
			fmt.Fprintln(stderr, "konglet translate:", err)
			return 1
		}
	}
	snap := objs.Build(*controller, gateways, types.NamespacedName(publish), snapshot.DefaultKong(*router))
	snap.ServiceUpstream = *serviceUpstream
	result := translate.Translate(snap, nil)
	var out []byte
	var err error
	if *output == "json" {
		out, err = result.JSON()
	} else {
		out, err = result.YAML()
	}
	if err != nil {
		fmt.Fprintln(stderr, "konglet translate:", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// decodePath reads one file, standard input, or every .yaml/.yml/.json file
// below a folder in name order.
func decodePath(objs *snapshot.Objects, path string) error {
	if path == "-" {
		return objs.Decode(os.Stdin, "stdin")
	}
	var paths []string
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := filepath.Ext(p)
		if !d.IsDir() && (p == path || ext == ".yaml" || ext == ".yml" || ext == ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = objs.Decode(f, p)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
