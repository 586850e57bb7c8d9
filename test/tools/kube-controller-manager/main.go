// Command kube-controller-manager builds a real Kubernetes controller manager from Go modules so that the
// conformance run gets Deployments, ReplicaSets and EndpointSlices reconciled without downloads.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
