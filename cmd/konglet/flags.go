package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// parseFlags parses args after applying KONGLET_* environment variables, so
// that the command line wins over the environment.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "KONGLET_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok || err != nil {
			return
		}
		values := []string{v}
		if _, repeatable := f.Value.(*namesFlag); repeatable {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if e := fs.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	if err != nil {
		return err
	}
	return fs.Parse(args)
}

// namesFlag is a repeatable namespace/name flag.
type namesFlag []types.NamespacedName

func (n *namesFlag) String() string {
	parts := make([]string, len(*n))
	for i, v := range *n {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

func (n *namesFlag) Set(v string) error {
	name, err := parseName(v)
	if err != nil {
		return err
	}
	*n = append(*n, name)
	return nil
}

// nameFlag is a single namespace/name flag.
type nameFlag types.NamespacedName

func (n *nameFlag) String() string {
	if n.Name == "" {
		return ""
	}
	return types.NamespacedName(*n).String()
}

func (n *nameFlag) Set(v string) error {
	name, err := parseName(v)
	*n = nameFlag(name)
	return err
}

func parseName(v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%q is not namespace/name", v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
