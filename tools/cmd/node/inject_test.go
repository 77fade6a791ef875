package main

// The injection webhook (deploy/inject) with real kubelets: a platform team's annotated
// Deployment, whose pod template holds no informerd at all, runs with the sidecar the webhook
// adds, and its controller reads through it. tests/inject.rs checks the stored pod against the
// documented sidecar on the apiserver alone; this is the same sidecar started by a kubelet.

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The demo controller's image, as the Makefile names it (DEMO_CONTROLLER_IMAGE), imported into
// the nodes.
const demoImage = "informerd-demo-controller:0.1.0"

// informerd is the image's static binary (make image), which the nodes run too.
func (r *realNode) informerd() string { return filepath.Join(r.root, ".cache/image/informerd") }

// injectWebhook starts `informerd inject-webhook` on loopback, where the apiserver (on the
// host) calls it, with a serving certificate for 127.0.0.1 signed by the control plane's CA;
// it is stopped when the test ends, and its log shown if the test failed. It returns its port.
func (r *realNode) injectWebhook() int {
	r.t.Helper()
	dir := r.t.TempDir()
	cert, key, err := pki{clusterDir: r.clusterDir, dir: dir}.issue("webhook", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "informerd-inject"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logPath := filepath.Join(dir, "webhook.log")
	log, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	// The default --image is informerd:VERSION, the image the nodes imported.
	cmd := exec.Command(r.informerd(), "inject-webhook", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--cert-file", cert, "--key-file", key)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	t := r.t
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("informerd inject-webhook's log:\n%s", b)
		}
	})
	return port
}

// registerInjectWebhook registers deploy/inject/webhook.yaml with the apiserver, deleted when
// the test ends, changed only in where the webhook is (on loopback, trusted through the
// control plane's CA, rather than the Service cert-manager's CA vouches for) and in selecting
// the namespace ns alone (beside its opt-in label), so that no other test's pods depend on it.
func (r *realNode) registerInjectWebhook(ns string, port int) {
	r.t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(r.root, "deploy/inject/webhook.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	var cfg admissionv1.MutatingWebhookConfiguration
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		r.t.Fatalf("deploy/inject/webhook.yaml: %v", err)
	}
	ca, err := os.ReadFile(pki{clusterDir: r.clusterDir}.caCert())
	if err != nil {
		r.t.Fatal(err)
	}
	cfg.ObjectMeta = metav1.ObjectMeta{Name: "informerd-inject-" + ns}
	url := fmt.Sprintf("https://127.0.0.1:%d/inject", port)
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		w.ClientConfig = admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
		if w.NamespaceSelector == nil || w.NamespaceSelector.MatchLabels["informerd.io/inject"] != "enabled" {
			r.t.Fatalf("deploy/inject/webhook.yaml: webhook %s does not select namespaces labelled informerd.io/inject: enabled", w.Name)
		}
		w.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] = ns
	}
	if _, err := r.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &cfg, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = r.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, cfg.Name, metav1.DeleteOptions{})
	})
}

// sidecarConfig is deploy/sidecar/informerd.yaml caching the namespaces PREFIX-0 and -1 rather
// than informerd-example-0 and -1, written to a file.
func (r *realNode) sidecarConfig(prefix string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, "deploy/sidecar/informerd.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	config := strings.ReplaceAll(string(b), "informerd-example-", prefix+"-")
	if config == string(b) {
		r.t.Fatal("deploy/sidecar/informerd.yaml no longer caches informerd-example-0 and -1: change sidecarConfig")
	}
	path := filepath.Join(r.t.TempDir(), "informerd.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// TestAnnotatedDeploymentRunsWithTheInjectedSidecar: the steps of deploy/inject/README.md in a
// namespace of the test's own: the namespace labelled, the sidecar's configuration in a
// ConfigMap, the RBAC `informerd rbac` prints for it, and a Deployment of the demo controller
// whose pod template only has the two annotations and the fsGroup. The kubelet starts the
// injected informerd, its probes make it ready, and the controller, given no socket, finds it
// through the INFORMERD_SOCKET the webhook set and reads every pod of the two namespaces.
func TestAnnotatedDeploymentRunsWithTheInjectedSidecar(t *testing.T) {
	r := needNodes(t)
	ctx := context.Background()
	const ns = "informerd-inject"
	want := r.cachedPods(ns, 2, 20)
	port := r.injectWebhook()
	r.registerInjectWebhook(ns, port)
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"informerd.io/inject": "enabled"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", ns, "--wait=false") })

	config := r.sidecarConfig(ns)
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-config"},
		Data:       map[string]string{"informerd.yaml": string(b)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "controller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbac := r.must(nil, r.informerd(), "rbac", "--config", config, "--service-account", "controller",
		"--service-account-namespace", ns, "--name", ns)
	r.must([]byte(rbac), "kubectl", "apply", "--server-side", "-f", "-")
	t.Cleanup(func() { _, _ = r.run([]byte(rbac), "kubectl", "delete", "-f", "-", "--wait=false") })

	annotations := map[string]string{"informerd.io/inject": "true", "informerd.io/config": "controller-config"}
	// The webhook answers, and the apiserver calls it for this namespace: before, a pod of the
	// Deployment would be created without the sidecar (or refused, while the webhook is down).
	r.eventually("the apiserver injecting through the webhook", func() (bool, string) {
		p, err := r.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: annotations},
			Spec:       corev1.PodSpec{ServiceAccountName: "controller", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return len(p.Spec.InitContainers) > 0 && p.Spec.InitContainers[0].Name == "informerd", "created without the sidecar"
	})

	labels := map[string]string{"app.kubernetes.io/name": "controller"}
	one, fsGroup := int32(1), int64(65532)
	start := time.Now()
	if _, err := r.cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "controller", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: "controller",
					// The socket's group (deploy/inject/README.md, step 5).
					SecurityContext: &corev1.PodSecurityContext{FSGroup: &fsGroup},
					Containers: []corev1.Container{{
						Name:  "controller",
						Image: demoImage,
						Args:  []string{"--prefix=" + ns, "--namespaces=2", "--churn=0s"},
					}},
				},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pod := r.sidecarReady(ns, "app.kubernetes.io/name=controller", start)
	if len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].RestartPolicy == nil ||
		*pod.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("pod %s: informerd is not the first init container as a native sidecar: %+v", pod.Name, pod.Spec.InitContainers)
	}
	socket := ""
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "INFORMERD_SOCKET" {
			socket = e.Value
		}
	}
	if socket != "/run/informerd/informerd.sock" {
		t.Fatalf("pod %s: the controller's INFORMERD_SOCKET is %q, not the injected socket's path", pod.Name, socket)
	}
	if got := r.controllerReport(pod); got != want {
		t.Fatalf("the controller read %d pods through the injected informerd; the apiserver has %d in %s-0 and -1", got, want, ns)
	}
	t.Logf("the controller read %d pods through the injected sidecar", want)
}
