package cluster

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStartServesGatewayAPI(t *testing.T) {
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := c.GW.GatewayV1().HTTPRoutes("default").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("listing HTTPRoutes on the real API server: %v", err)
	}
	v, err := c.Kube.Discovery().ServerVersion()
	if err != nil || v.GitVersion != "v1.37.2" {
		t.Fatalf("server version %v, %v; want v1.37.2", v, err)
	}
}
