// Command konglet runs beside Kong and configures it from the Gateway API.
//
//	konglet run        the sidecar
//	konglet translate  offline: Gateway API YAML in, Kong config and statuses out
//	konglet version
package main

import (
	"fmt"
	"io"
	"os"
)

// version is stamped at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runSidecar(args[1:], stderr)
	case "translate":
		return runTranslate(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "konglet", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "konglet: unknown command %q\n\n%s\n", args[0], usage)
	return 2
}

const usage = `usage: konglet <command> [flags]

commands:
  run        run as the sidecar of a Kong Pod (konglet run -h for flags)
  translate  print the Kong configuration and statuses for Gateway API YAML files
  version    print the version

Every flag has an environment variable: --kong-admin-url is KONGLET_KONG_ADMIN_URL.`
