package grpcguard_test

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/flood"
	"github.com/slidegate/slidegate/middleware/grpcguard"
)

// TestAFloodOfUnknownMethodsMakesOneResource calls a server that has an
// UnknownServiceHandler, as an attacker would, with thousands of long
// method names that are new every time: they make one resource, and the
// guard's memory does not grow with them.
func TestAFloodOfUnknownMethodsMakesOneResource(t *testing.T) {
	g, err := slidegate.New()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unknown := func(any, grpc.ServerStream) error { return status.Error(codes.Unimplemented, "no such method") }
	srv := grpc.NewServer(append(withServer(g), grpc.UnknownServiceHandler(unknown))...)
	testpb.RegisterTestServiceServer(srv, &testService{})
	go srv.Serve(lis) //nolint:errcheck // returns when stopped
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	ctx := context.Background()

	before := flood.HeapInUse()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	for i := range n {
		method := "/" + flood.Token(rng, 2<<10) + "/" + flood.Token(rng, 2<<10)
		err := conn.Invoke(ctx, method, &testpb.SimpleRequest{}, &testpb.SimpleResponse{})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("call %d: %v, want the unknown handler's Unimplemented", i, err)
		}
	}
	if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	grew := int64(flood.HeapInUse()) - int64(before)

	got := map[string]int64{}
	for _, s := range g.Resources() {
		got[s.Resource] = s.Totals.Allowed
	}
	if len(got) != 2 || got[grpcguard.UnknownMethod] != n || got[unaryMethod] != 1 {
		t.Fatalf("resources after the flood: %v, want %d under %q and the known method's 1", got, n, grpcguard.UnknownMethod)
	}
	const bound = 4 << 20
	t.Logf("the heap grew %d KiB over the flood", grew>>10)
	if grew > bound {
		t.Fatalf("the heap grew %d KiB over the flood, want at most %d KiB", grew>>10, bound>>10)
	}
}
