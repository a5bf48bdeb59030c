package idemgrpc_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// charger is a payment service: each UnaryCall charges a card.
type charger struct {
	grpc_testing.UnimplementedTestServiceServer
	charges int
}

func (c *charger) UnaryCall(context.Context, *grpc_testing.SimpleRequest) (*grpc_testing.SimpleResponse, error) {
	c.charges++
	return &grpc_testing.SimpleResponse{Username: fmt.Sprintf("ch_%d", c.charges)}, nil
}

// The same payment arrives three times with one key; the card is charged
// once and every copy gets the first answer, marked as a replay.
func ExampleUnaryServerInterceptor() {
	store := memstore.New() // redisstore, sqlstore or layered in production
	methods := idemgrpc.WithMethods("/grpc.testing.TestService/UnaryCall")
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idemgrpc.UnaryServerInterceptor(store, methods)))
	svc := &charger{}
	grpc_testing.RegisterTestServiceServer(srv, svc)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := grpc_testing.NewTestServiceClient(conn)
	ctx, _ := idemgrpc.WithKey(context.Background(), "8e03978e-40d5-43e8-bc93-6894a57f9324")
	for range 3 {
		var header metadata.MD
		resp, err := client.UnaryCall(ctx, &grpc_testing.SimpleRequest{ResponseSize: 100}, grpc.Header(&header))
		fmt.Println(resp.GetUsername(), err, "replayed:", header.Get(idemgrpc.ReplayedMetadataKey))
	}
	fmt.Println("charges:", svc.charges)
	// Output:
	// ch_1 <nil> replayed: []
	// ch_1 <nil> replayed: [true]
	// ch_1 <nil> replayed: [true]
	// charges: 1
}
