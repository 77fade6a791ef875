package cache_test

// The harness in place of envtest: the suite's own control plane (INFORMERD_KUBECONFIG, a
// kube-apiserver without kube-controller-manager, as envtest's) and a real informerd
// (INFORMERD_BIN) serving informerd.yaml, which crcache reads. This file is the project's, not
// upstream's: UPSTREAM.md lists every change to the vendored files and why.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/informerdv1"
)

// syncTimeout bounds the wait for a sidecar to sync; it only keeps a broken run from hanging.
const syncTimeout = 2 * time.Minute

// sidecarTarget is the address of the suite's sidecar, set by environment.Start.
var sidecarTarget string

// baseline (CRCACHE_SUITE_BASELINE=1) runs the specs against controller-runtime's own cache
// (cache.New) on the same control plane, sidecars and adapted tests: what passes there and
// fails with crcache is crcache's, not the harness's.
var baseline = os.Getenv("CRCACHE_SUITE_BASELINE") != ""

// newCache stands in for cache.New: a crcache over the suite's sidecar, once the sidecar has
// caught up with the apiserver's pods (caughtUp). The rest.Config is not used (the sidecar
// reads the control plane with its own kubeconfig).
func newCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	if baseline {
		return cache.New(cfg, opts)
	}
	if err := caughtUp(); err != nil {
		return nil, err
	}
	c, err := crcache.New(crcache.Options{Target: sidecarTarget}, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// caughtUp waits until the suite's sidecar holds exactly the pods the apiserver holds, each at
// its resourceVersion or later. The specs write pods in their BeforeEach and then construct the
// cache; the default cache lists at its start, after those writes, while the sidecar is an
// environment that was already running and sees each write one watch event later. Waiting here
// gives the specs the environment they assume, as envtest's apiserver gives the default cache;
// a spec that writes and reads at once without a new cache still races (expected-failures.txt).
//
// It lists with the suite's own configuration (cfg, from BeforeSuite), not the one a spec
// passes (one passes an empty rest.Config).
func caughtUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	side, err := informerd.Dial(sidecarTarget)
	if err != nil {
		return err
	}
	defer side.Close()
	for {
		want, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("harness: list pods from the apiserver: %w", err)
		}
		have := map[string]string{}
		_, _, err = side.ListObjects(ctx, "pods", func(o *informerdv1.Object) {
			have[informerd.Key(o)] = o.GetResourceVersion()
		}, informerd.WithFields("metadata.name"))
		if err != nil {
			return fmt.Errorf("harness: list pods from the sidecar: %w", err)
		}
		if sameOrNewer(want.Items, have) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: the sidecar did not catch up with the apiserver's pods: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sameOrNewer reports whether have holds exactly the pods of want, each at its resourceVersion
// or later.
func sameOrNewer(want []corev1.Pod, have map[string]string) bool {
	if len(want) != len(have) {
		return false
	}
	for _, p := range want {
		rv, ok := have[p.Namespace+"/"+p.Name]
		if !ok {
			return false
		}
		a, errA := strconv.ParseUint(rv, 10, 64)
		b, errB := strconv.ParseUint(p.ResourceVersion, 10, 64)
		if errA != nil || errB != nil || a < b {
			return false
		}
	}
	return true
}

// environment stands in for envtest.Environment: Start returns the control plane's config
// once the suite's sidecar serves it, synced; Stop stops the sidecar (the control plane is
// the make target's, which stops it).
type environment struct {
	sidecar *sidecar
}

func (e *environment) Start() (*rest.Config, error) {
	bin, kubeconfig, err := fromEnv()
	if err != nil {
		return nil, err
	}
	s, err := startSidecar(bin, kubeconfig, "informerd.yaml", os.Getenv("CRCACHE_SUITE_DIR"))
	if err != nil {
		return nil, err
	}
	e.sidecar = s
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := s.waitSynced(ctx); err != nil {
		return nil, err
	}
	sidecarTarget = s.target()
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func (e *environment) Stop() error {
	if e.sidecar == nil {
		return nil
	}
	return e.sidecar.stop()
}

func fromEnv() (bin, kubeconfig string, err error) {
	bin, kubeconfig = os.Getenv("INFORMERD_BIN"), os.Getenv("INFORMERD_KUBECONFIG")
	if bin == "" || kubeconfig == "" {
		return "", "", fmt.Errorf("INFORMERD_BIN and INFORMERD_KUBECONFIG must be set (got %q, %q): the suite "+
			"runs against a real informerd and a control plane of its own; run `make crcache-suite` from the "+
			"repository root, which builds both and sets them", bin, kubeconfig)
	}
	return bin, kubeconfig, nil
}

// sidecar is one informerd process serving a configuration of this directory on a socket of
// its own (${CRCACHE_SUITE_SOCKET} in the file).
type sidecar struct {
	dir    string // holds the socket; removed by stop
	socket string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSidecar runs informerd with config (a file of this directory) against kubeconfig; its
// log goes to logDir (a temporary directory when empty, removed by stop).
func startSidecar(bin, kubeconfig, config, logDir string) (*sidecar, error) {
	config, err := filepath.Abs(config)
	if err != nil {
		return nil, err
	}
	// A short path of its own: a unix socket's path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "crcache-suite-")
	if err != nil {
		return nil, err
	}
	s := &sidecar{dir: dir, socket: filepath.Join(dir, "informerd.sock"), exited: make(chan struct{})}
	if logDir == "" {
		logDir = dir
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	s.log = filepath.Join(logDir, "informerd-"+filepath.Base(dir)+".log")
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "serve", "--config", config, "--kubeconfig", kubeconfig)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = append(os.Environ(), "RUST_LOG=info", "CRCACHE_SUITE_SOCKET="+s.socket)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	return s, nil
}

func (s *sidecar) target() string { return "unix://" + s.socket }

// waitSynced waits until the sidecar's Status reports every resource synced.
func (s *sidecar) waitSynced(ctx context.Context) error {
	return s.waitServing(ctx, func(c *informerd.Client) error { return c.WaitForSynced(ctx, 100*time.Millisecond) })
}

// waitServing waits until the sidecar answers Status, synced or not.
func (s *sidecar) waitServing(ctx context.Context, until ...func(*informerd.Client) error) error {
	c, err := informerd.Dial(s.target())
	if err != nil {
		return err
	}
	defer c.Close()
	check := func(c *informerd.Client) error {
		for {
			if _, err := c.Status(ctx, ""); err == nil {
				return nil
			} else if ctx.Err() != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(until) > 0 {
		check = until[0]
	}
	done := make(chan error, 1)
	go func() { done <- check(c) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("informerd on %s: %w (log: %s)", s.socket, err, s.log)
		}
		return nil
	case <-s.exited:
		return fmt.Errorf("informerd exited on start-up (log: %s)", s.log)
	}
}

// stop asks the sidecar to stop (SIGINT), kills it after 10 s, and removes its directory.
func (s *sidecar) stop() error {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	return os.RemoveAll(s.dir)
}

// withoutBubble stands in for synctest.Test: a synctest bubble cannot hold the real sidecar's
// connection (its goroutines, blocked on the network, never let the bubble's clock advance),
// so the test runs on real time.
func withoutBubble(t *testing.T, f func(t *testing.T)) { f(t) }

// waitUntilStarted stands in for synctest.Wait, which waited for Start's goroutine to block:
// WaitForCacheSync returns once Start has run and the informers it has (none yet) synced. Its
// answer is not asserted, as synctest.Wait asserts nothing; it is bounded in case a cache
// waits for more than that.
func waitUntilStarted(ctx context.Context, c cache.Cache) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = c.WaitForCacheSync(ctx)
}

// unsyncedSidecar stands in for controllertest.NewFakeInformer, an informer that has not
// synced until Synced is called: a real informerd (informerd-unsynced.yaml: Services and Pods)
// whose identity, a ServiceAccount of its own, may not read what it caches, so its resources
// stay unsynced; Synced grants it Services, which the sidecar then syncs.
type unsyncedSidecar struct {
	t       *testing.T
	kube    kubernetes.Interface
	sa      string
	sidecar *sidecar
	// config is the ServiceAccount's, for the baseline's cache.New.
	config *rest.Config
}

// unsyncedNamespace holds the ServiceAccounts of the unsynced sidecars, away from the
// namespaces the specs count objects in.
const unsyncedNamespace = "crcache-suite-unsynced"

// servicesReader is the ClusterRole that Synced binds.
const servicesReader = "crcache-suite-services-reader"

func newUnsyncedSidecar(t *testing.T) *unsyncedSidecar {
	t.Helper()
	bin, kubeconfig, err := fromEnv()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	u := &unsyncedSidecar{t: t, kube: kube, sa: "unsynced-" + randSuffix()}
	ignoreExists := func(_ any, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ignoreExists(kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unsyncedNamespace}}, metav1.CreateOptions{}))
	ignoreExists(kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: servicesReader},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}))
	if _, err := kube.CoreV1().ServiceAccounts(unsyncedNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: u.sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = kube.RbacV1().ClusterRoleBindings().Delete(bg, u.sa, metav1.DeleteOptions{})
		_ = kube.CoreV1().ServiceAccounts(unsyncedNamespace).Delete(bg, u.sa, metav1.DeleteOptions{})
	})
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(unsyncedNamespace).CreateToken(ctx, u.sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The admin kubeconfig's cluster, with the ServiceAccount's token as the identity.
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := kc.CurrentContext
	kc.AuthInfos[kc.Contexts[ctxName].AuthInfo] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	tokenKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, tokenKubeconfig); err != nil {
		t.Fatal(err)
	}
	if u.config, err = clientcmd.BuildConfigFromFlags("", tokenKubeconfig); err != nil {
		t.Fatal(err)
	}
	s, err := startSidecar(bin, tokenKubeconfig, "informerd-unsynced.yaml", os.Getenv("CRCACHE_SUITE_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	u.sidecar = s
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(s.log); err == nil {
				t.Logf("informerd log (%s):\n%s", s.log, b)
			}
		}
	})
	waitCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if err := s.waitServing(waitCtx); err != nil {
		t.Fatal(err)
	}
	return u
}

// newCache is a crcache over this sidecar (the baseline: controller-runtime's cache with the
// sidecar's identity, unsynced for the same reason).
func (u *unsyncedSidecar) newCache(opts cache.Options) (cache.Cache, error) {
	if baseline {
		return cache.New(u.config, opts)
	}
	c, err := crcache.New(crcache.Options{Target: u.sidecar.target()}, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Synced lets the sidecar read Services (it syncs them at its next retry, within the watch's
// backoff of at most 30 s).
func (u *unsyncedSidecar) Synced() {
	u.t.Helper()
	_, err := u.kube.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: u.sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: servicesReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: u.sa, Namespace: unsyncedNamespace}},
	}, metav1.CreateOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
}

// randSuffix is six random hex digits, for names no other run uses.
func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
