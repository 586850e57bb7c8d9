package conformance

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
)

// grpcEcho is echo-basic's gRPC mode (GRPC_ECHO_SERVER set), cleartext:
// every method answers with the full method name, the request metadata,
// the :authority and the Pod context.
type grpcEcho struct {
	pb.UnimplementedGrpcEchoServer
	pod *simPod
}

func (s *grpcEcho) echo(ctx context.Context, method string) (*pb.EchoResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	authority := ""
	var headers []*pb.Header
	for k, vs := range md {
		for _, v := range vs {
			if k == ":authority" {
				authority = v
			}
			headers = append(headers, &pb.Header{Key: k, Value: v})
		}
	}
	return &pb.EchoResponse{Assertions: &pb.Assertions{
		FullyQualifiedMethod: "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/" + method,
		Headers:              headers,
		Authority:            authority,
		Context:              &pb.Context{Namespace: s.pod.namespace, Pod: s.pod.name},
	}}, nil
}

func (s *grpcEcho) Echo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "Echo")
}

func (s *grpcEcho) EchoTwo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "EchoTwo")
}

func (s *grpcEcho) EchoThree(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "EchoThree")
}

// grpcServer serves the gRPC echo on l; Close stops it.
type grpcServer struct{ s *grpc.Server }

func serveGRPCEcho(l net.Listener, pod *simPod) *grpcServer {
	s := grpc.NewServer()
	pb.RegisterGrpcEchoServer(s, &grpcEcho{pod: pod})
	go func() { _ = s.Serve(l) }()
	return &grpcServer{s: s}
}

func (g *grpcServer) Close() error {
	g.s.Stop()
	return nil
}
