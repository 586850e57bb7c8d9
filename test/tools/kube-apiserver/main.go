// Command kube-apiserver builds a real Kubernetes API server from Go modules so
// that integration tests run against the real thing without downloads.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
