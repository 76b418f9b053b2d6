package fakecri

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEveryCRICallSurvivesEmptyAndUnknownInput calls every method of both
// CRI services over gRPC — found by reflection, so a method added to
// cri-api is covered without editing this test — once with an empty
// request and once with every string field set to an ID that does not
// exist. grpc-go does not recover handler panics, so a panic would kill
// this test binary; beyond that, each answer must be OK or a gRPC status
// a client can act on.
func TestEveryCRICallSurvivesEmptyAndUnknownInput(t *testing.T) {
	srv, err := Start(filepath.Join(shortTempDir(t), "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	allowed := map[codes.Code]bool{
		codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.Unimplemented: true,
		codes.FailedPrecondition: true, codes.DeadlineExceeded: true,
	}
	clients := []any{runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)}
	calls := 0
	for _, client := range clients {
		v := reflect.ValueOf(client)
		for i := 0; i < v.NumMethod(); i++ {
			m := v.Type().Method(i)
			reqType := v.Method(i).Type().In(1).Elem() // (ctx, *Req, ...CallOption)
			for _, variant := range []string{"empty", "unknown"} {
				req := reflect.New(reqType)
				if variant == "unknown" {
					fillStrings(req.Elem(), "does-not-exist")
				}
				code := invoke(t, v.Method(i), req)
				calls++
				if !allowed[code] {
					t.Errorf("%s with %s input: code %s", m.Name, variant, code)
				}
			}
		}
	}
	// Still serving after all of it.
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("the server no longer answers: %v", err)
	}
	t.Logf("%d calls over %d services", calls, len(clients))
}

// invoke calls a generated client method; server-streaming methods return a
// stream, from which one message is read with a short deadline.
func invoke(t *testing.T, method reflect.Value, req reflect.Value) codes.Code {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := method.Call([]reflect.Value{reflect.ValueOf(ctx), req})
	if err, _ := out[1].Interface().(error); err != nil {
		return status.Code(err)
	}
	if stream, ok := out[0].Interface().(grpc.ClientStream); ok {
		recv := out[0].MethodByName("Recv")
		if !recv.IsValid() {
			return codes.OK
		}
		res := recv.Call(nil)
		stream.CloseSend()
		if err, _ := res[1].Interface().(error); err != nil && !strings.Contains(err.Error(), "EOF") {
			return status.Code(err)
		}
	}
	return codes.OK
}

// fillStrings sets every string field, also in nested messages, to s.
func fillStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(s)
		}
	case reflect.Ptr:
		if v.IsNil() && v.CanSet() && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			fillStrings(v.Elem(), s)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillStrings(v.Field(i), s)
			}
		}
	}
}

// TestInProcessCallsSurviveNilRequests: labs also call the Runtime
// directly, without gRPC; a nil request must be an error, not a panic.
func TestInProcessCallsSurviveNilRequests(t *testing.T) {
	r := newRuntime(t)
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	v := reflect.ValueOf(r)
	for _, iface := range []reflect.Type{
		reflect.TypeOf((*runtimeapi.RuntimeServiceServer)(nil)).Elem(),
		reflect.TypeOf((*runtimeapi.ImageServiceServer)(nil)).Elem(),
	} {
		for i := 0; i < iface.NumMethod(); i++ {
			name := iface.Method(i).Name
			m := v.MethodByName(name)
			if !m.IsValid() { // mustEmbedUnimplemented…: unexported
				continue
			}
			mt := m.Type()
			if mt.NumIn() != 2 || mt.In(0) != ctxType { // streaming methods need a stream
				continue
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s(nil) panicked: %v", name, p)
					}
				}()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.Zero(mt.In(1))})
			}()
		}
	}
}
