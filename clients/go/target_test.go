package informerd_test

// Dial without a target: the socket in $INFORMERD_SOCKET, else the default socket; a target
// given wins. A failure to connect says where the address came from, on unary calls and on
// streams alike.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	informerd "informerd.io/clients/go"
)

// unreachable dials with no target and returns the errors of a Status call and of a Watch.
func unreachable(t *testing.T) (unary, stream error) {
	t.Helper()
	c, err := informerd.Dial("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, unary = c.Status(ctx, "")
	w, err := c.Watch(ctx, "pods")
	if err == nil {
		defer w.Close()
		_, err = w.Next()
	}
	return unary, err
}

func TestDialWithoutTargetReadsINFORMERD_SOCKET(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "sockenv")
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	ctx := context.Background()

	t.Setenv(informerd.SocketEnv, s.Socket)
	c, err := informerd.Dial("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx, "")
	if err != nil || !st.Synced {
		t.Fatalf("Status through $INFORMERD_SOCKET=%s: %v, %v", s.Socket, st, err)
	}

	// A target given wins over the variable.
	missing := filepath.Join(t.TempDir(), "nothing.sock")
	t.Setenv(informerd.SocketEnv, missing)
	if _, err := dialTarget(t, "unix://"+s.Socket).Status(ctx, ""); err != nil {
		t.Fatalf("Status through the target given: %v", err)
	}

	// Nothing at the variable's socket: the failures name the variable and the path.
	unary, stream := unreachable(t)
	for what, err := range map[string]error{"Status": unary, "Watch": stream} {
		if informerd.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "$INFORMERD_SOCKET="+missing) {
			t.Errorf("%s with nothing at $INFORMERD_SOCKET: %v; want UNAVAILABLE naming $INFORMERD_SOCKET=%s", what, err, missing)
		}
	}

	// Neither: the default socket; a failure there says to pass a target or set the variable.
	t.Setenv(informerd.SocketEnv, "")
	if _, err := os.Stat(informerd.DefaultSocket); errors.Is(err, os.ErrNotExist) {
		unary, stream := unreachable(t)
		for what, err := range map[string]error{"Status": unary, "Watch": stream} {
			if informerd.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "pass a target or set $INFORMERD_SOCKET") ||
				!strings.Contains(err.Error(), informerd.DefaultSocket) {
				t.Errorf("%s with neither a target nor $INFORMERD_SOCKET: %v; want UNAVAILABLE naming both", what, err)
			}
		}
	}
}
