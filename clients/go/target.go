package informerd

// Where Dial connects: the target given, else the socket in $INFORMERD_SOCKET (what deploy/
// sets for the controller), else DefaultSocket; and, for the two fallbacks, what a failure to
// connect adds to its message.
//
// Decision: with neither a target nor $INFORMERD_SOCKET, Dial still uses DefaultSocket, as the
// informerd CLI and the Python client do (a sidecar of the default configuration listens
// there). What would be unclear is a failure to connect there, so such a failure (UNAVAILABLE
// without an informerd-reason, which the sidecar's own UNAVAILABLEs carry) says where the
// address came from and how to give another. Interceptors add it, so every call and stream
// of the client has it without each wrapping site knowing.

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// SocketEnv is the environment variable Dial reads when given no target: the path of the
// sidecar's Unix socket.
const SocketEnv = "INFORMERD_SOCKET"

// resolveTarget is Dial's target for what it was given, and the hint of a connection failure
// ("" for a target given).
func resolveTarget(target string) (string, string) {
	switch {
	case target != "":
		if strings.HasPrefix(target, "/") {
			return "unix://" + target, ""
		}
		return target, ""
	case os.Getenv(SocketEnv) != "":
		path := os.Getenv(SocketEnv)
		// A path, never a URL, as the CLI takes it; a relative one is relative to the cwd.
		if strings.HasPrefix(path, "/") {
			return "unix://" + path, " (the socket of $" + SocketEnv + "=" + path + ")"
		}
		return "unix:" + path, " (the socket of $" + SocketEnv + "=" + path + ")"
	default:
		return "unix://" + DefaultSocket, " (the default socket " + DefaultSocket +
			": Dial was given no target and $" + SocketEnv + " is not set; pass a target or set $" + SocketEnv + ")"
	}
}

// withHint adds hint to the message of a failure to reach the sidecar.
func withHint(err error, hint string, header, trailer metadata.MD) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || ReasonFromMetadata(trailer, header) != "" {
		return err
	}
	p := st.Proto()
	p.Message += hint
	return status.FromProto(p).Err()
}

// hintInterceptors add hint to the connection failures of unary calls and streams.
func hintInterceptors(hint string) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var header, trailer metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header), grpc.Trailer(&trailer))...)
		if err != nil {
			return withHint(err, hint, header, trailer)
		}
		return nil
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, withHint(err, hint, nil, nil)
		}
		return &hintStream{ClientStream: s, hint: hint}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type hintStream struct {
	grpc.ClientStream
	hint string
}

func (s *hintStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && !errors.Is(err, io.EOF) {
		header, _ := s.Header() // the call has ended: at once
		return withHint(err, s.hint, header, s.Trailer())
	}
	return err
}
