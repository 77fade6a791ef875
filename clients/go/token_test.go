package informerd_test

// Tokens on the wire, in-process: a gRPC server of the test's own records the `authorization`
// metadata of every call it receives, unary (Get) and streaming (Watch), while the token file
// rotates the way the kubelet rotates a projected token (a new directory, then a symlink swap).

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// authRecorder is a Cache server that answers Get and Watch and records their authorization.
type authRecorder struct {
	informerdv1.UnimplementedCacheServer
	mu   sync.Mutex
	seen []string
}

func (r *authRecorder) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, strings.Join(md.Get("authorization"), ","))
}

func (r *authRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

func (r *authRecorder) Get(ctx context.Context, req *informerdv1.GetRequest) (*informerdv1.GetResponse, error) {
	r.record(ctx)
	return &informerdv1.GetResponse{Object: &informerdv1.Object{Name: req.Name, Json: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)}}, nil
}

func (r *authRecorder) Watch(req *informerdv1.WatchRequest, stream grpc.ServerStreamingServer[informerdv1.WatchEvent]) error {
	r.record(stream.Context())
	return stream.Send(&informerdv1.WatchEvent{Type: informerdv1.EventType_SYNCED})
}

// serve starts the authRecorder on a Unix socket; its target.
func serveRecorder(t *testing.T) (*authRecorder, string) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	rec := &authRecorder{}
	srv := grpc.NewServer()
	informerdv1.RegisterCacheServer(srv, rec)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return rec, "unix://" + socket
}

// calls makes a Get and a Watch; the authorization each carried.
func calls(t *testing.T, c *informerd.Client, rec *authRecorder) (get, watch string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "pods", "ns", "p"); err != nil {
		t.Fatalf("Get: %v", err)
	}
	get = rec.last()
	w, err := c.Watch(ctx, "pods")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	if _, err := w.Next(); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return get, rec.last()
}

func TestWithTokenSendsABearerTokenOnEveryCall(t *testing.T) {
	rec, target := serveRecorder(t)
	c, err := informerd.Dial(target, informerd.WithToken("static-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if get, watch := calls(t, c, rec); get != "Bearer static-token" || watch != "Bearer static-token" {
		t.Fatalf("Get sent %q, Watch sent %q", get, watch)
	}

	plain, err := informerd.Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if get, watch := calls(t, plain, rec); get != "" || watch != "" {
		t.Fatalf("without a token: Get sent %q, Watch sent %q", get, watch)
	}
}

// projected writes token the way the kubelet's atomic writer does: the file in a new
// timestamped directory, ..data a symlink to that directory (replaced by a rename), and
// token a symlink to ..data/token.
func projected(t *testing.T, dir, token string) {
	t.Helper()
	gen, err := os.MkdirTemp(dir, "..gen_")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "token")
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "token"), link); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWithTokenFileFollowsTheRotatedToken(t *testing.T) {
	rec, target := serveRecorder(t)
	dir := t.TempDir()
	projected(t, dir, "first-token")
	c, err := informerd.Dial(target, informerd.WithTokenFile(filepath.Join(dir, "token")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if get, watch := calls(t, c, rec); get != "Bearer first-token" || watch != "Bearer first-token" {
		t.Fatalf("Get sent %q, Watch sent %q", get, watch)
	}
	// Same length, and perhaps the same modification time: the new file tells the change.
	projected(t, dir, "secnd-token")
	if get, watch := calls(t, c, rec); get != "Bearer secnd-token" || watch != "Bearer secnd-token" {
		t.Fatalf("after the rotation: Get sent %q, Watch sent %q", get, watch)
	}

	// A file that goes away fails the call, naming the file; none is sent without a token.
	if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "pods", "ns", "p")
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), filepath.Join(dir, "token")) {
		t.Fatalf("Get without a token file: %v", err)
	}
}

func TestWithTokenFileFailsDialWithoutTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "token")
	_, err := informerd.Dial("unix:///nonexistent.sock", informerd.WithTokenFile(missing))
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Dial with a missing token file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := informerd.Dial("unix:///nonexistent.sock", informerd.WithTokenFile(empty)); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("Dial with an empty token file: %v", err)
	}
}
