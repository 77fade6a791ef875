package informerd

// Tokens: with server.authorization: kubernetes (node-local mode), informerd serves each client
// what that client's own ServiceAccount may read, and a client says who it is with a token in
// the `authorization: Bearer <token>` metadata of every call, unary and streaming alike.
//
// Decision: WithTokenFile stats the file on every call and reads it again when it is another
// file (another inode: the kubelet writes a new one) or its modification time or size changed, instead of client-go's NewCachedFileTokenSource, which re-reads it once
// a minute: a rotated token is used from the next call on, and a stat is cheap beside a call.
// The path is opened anew each time, never kept open: the kubelet rotates a projected token by
// swapping a symlink (..data) to a new directory, which an open file would never see.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// WithToken sends token as `authorization: Bearer <token>` on every call. For a token that
// rotates (a projected ServiceAccount token), use WithTokenFile.
func WithToken(token string) DialOption {
	return func(o *dialOptions) {
		o.grpc = append(o.grpc, grpc.WithPerRPCCredentials(staticToken(strings.TrimSpace(token))))
	}
}

// WithTokenFile sends the token in the file at path (a projected ServiceAccount token with the
// audience "informerd", e.g. /var/run/secrets/informerd/token) as `authorization: Bearer
// <token>` on every call, and reads the file again whenever it changes, so that the token the
// kubelet rotates is picked up without a restart. Dial fails if the file cannot be read; a
// call fails with UNAUTHENTICATED, naming the file, if it cannot be read later.
func WithTokenFile(path string) DialOption {
	return func(o *dialOptions) {
		f := &tokenFile{path: path}
		o.grpc = append(o.grpc, grpc.WithPerRPCCredentials(f))
		o.check = append(o.check, func() error {
			_, err := f.token()
			return err
		})
	}
}

type staticToken string

func (t staticToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return bearer(string(t)), nil
}

// RequireTransportSecurity is false: informerd is reached over a Unix socket or loopback, whose
// peers the kernel vouches for.
func (staticToken) RequireTransportSecurity() bool { return false }

func bearer(token string) map[string]string {
	return map[string]string{"authorization": "Bearer " + token}
}

// tokenFile is a token read from a file, read again when the path leads to another file (the
// kubelet's symlink swap) or the file's modification time or size changed.
type tokenFile struct {
	path string

	mu    sync.Mutex
	read  os.FileInfo // what the path led to when value was read
	value string
}

var _ credentials.PerRPCCredentials = (*tokenFile)(nil)

func (f *tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	token, err := f.token()
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return bearer(token), nil
}

func (*tokenFile) RequireTransportSecurity() bool { return false }

// token is the file's token, read again if the file changed since it was last read.
func (f *tokenFile) token() (string, error) {
	info, err := os.Stat(f.path) // follows the kubelet's symlinks to the current file
	if err != nil {
		return "", fmt.Errorf("informerd: token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read != nil && os.SameFile(f.read, info) && info.ModTime().Equal(f.read.ModTime()) && info.Size() == f.read.Size() {
		return f.value, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("informerd: token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("informerd: token file %s is empty", f.path)
	}
	f.value, f.read = token, info
	return token, nil
}
