package main

// deploy/service on real nodes: two replicas of informerd behind their Service, and an agent in
// a namespace of its own reading the cluster's pods through the Service's ClusterIP (kube-proxy)
// over TLS, with a projected token of its own ServiceAccount.
//
// Decision: the serving certificate is signed here by the control plane's CA, for the Service's
// DNS name, and the agent trusts that CA through the ConfigMap kube-root-ca.crt that every
// namespace has; deploy/service/certificate.yaml (cert-manager) is not used, as the nodes have
// no cert-manager. The Secret is the one the Deployment mounts, informerd-tls.

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	serviceNS     = "informerd-service"
	serviceName   = "informerd.informerd-service.svc"
	serviceClient = "informerd-service-client"
)

// A service agent's line: 1 pods listed, 2 the Informer's view, 3 its relists of either kind,
// 4 those in full; or 5 the reason of an error.
var serviceAgentLine = regexp.MustCompile(`agent node=\S* (?:pods=(\d+) foreign=\d+ informer=(\d+) epoch=\d+ relists=(\d+) full=(\d+)|error=(\S*) code=\S+)`)

func TestDeployServiceServesClientsThroughItsService(t *testing.T) {
	r := needNodes(t)
	ctx := context.Background()
	r.apply("deploy/service")
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", serviceNS, "--wait=false") })
	r.serviceCertificate()
	r.eventually("both replicas ready", func() (bool, string) {
		d, err := r.cs.AppsV1().Deployments(serviceNS).Get(ctx, "informerd", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2,
			fmt.Sprintf("%d ready, %d updated", d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
	})
	agent := r.serviceAgent()
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", serviceClient, "--wait=false") })

	// More pods for the replicas and the agent to hold: the pause image, which every node has.
	for i := 0; i < 4; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pause-%d", i)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: PauseImage}}},
		}
		if _, err := r.cs.CoreV1().Pods(serviceClient).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The agent's List and Informer hold every pod of the cluster, as the apiserver lists them.
	first := r.serviceAgentSeesEveryPod(agent, func([]string) bool { return true })
	t.Logf("agent: %s", first[0])

	// Each of the two replicas the agent found goes away in turn (a graceful delete, as a rollout
	// or a drain does it); the agent is on one of them, so it moves to another through the same
	// Service, and resumes by delta: no relist in full.
	pods, err := r.cs.CoreV1().Pods(serviceNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=informerd"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("informerd's pods: %v, %d", err, len(pods.Items))
	}
	for _, p := range pods.Items {
		victim := p.Name
		if err := r.cs.CoreV1().Pods(serviceNS).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r.eventually("a replica replaced "+victim, func() (bool, string) {
			d, err := r.cs.AppsV1().Deployments(serviceNS).Get(ctx, "informerd", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			l, err := r.cs.CoreV1().Pods(serviceNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=informerd"})
			if err != nil {
				return false, err.Error()
			}
			for _, p := range l.Items {
				if p.Name == victim {
					return false, victim + " still there"
				}
			}
			return d.Status.ReadyReplicas == 2, fmt.Sprintf("%d ready", d.Status.ReadyReplicas)
		})
	}
	last := r.serviceAgentSeesEveryPod(agent, func(m []string) bool {
		relists, _ := strconv.Atoi(m[3])
		return relists > 0
	})
	if last[4] != "0" {
		t.Fatalf("the agent relisted in full after a replica went away: %s", last[0])
	}
	t.Logf("after both replicas were replaced: %s", last[0])
}

// serviceCertificate creates the Secret informerd-tls: a serving certificate for the Service's
// DNS name, signed by the control plane's CA.
func (r *realNode) serviceCertificate() {
	r.t.Helper()
	dir := r.t.TempDir()
	cert, key, err := pki{clusterDir: r.clusterDir, dir: dir}.issue("informerd", &x509.Certificate{
		Subject:     pkix.Name{CommonName: serviceName},
		DNSNames:    []string{serviceName, serviceName + ".cluster.local"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	data := map[string][]byte{}
	for name, path := range map[string]string{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key} {
		if data[name], err = os.ReadFile(path); err != nil {
			r.t.Fatal(err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "informerd-tls", Namespace: serviceNS},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
	if _, err := r.cs.CoreV1().Secrets(serviceNS).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// serviceAgent starts the agent in a namespace of its own, allowed to get, list and watch pods
// everywhere, reading the Service's ClusterIP over TLS with a projected token for informerd; it
// returns the agent's pod once it runs.
func (r *realNode) serviceAgent() *corev1.Pod {
	r.t.Helper()
	ctx := context.Background()
	svc, err := r.cs.CoreV1().Services(serviceNS).Get(ctx, "informerd", metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceClient}}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.cs.CoreV1().ServiceAccounts(serviceClient).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: serviceClient},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := r.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: serviceClient},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: serviceClient},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent", Namespace: serviceClient}},
	}
	if _, err := r.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = r.cs.RbacV1().ClusterRoleBindings().Delete(ctx, serviceClient, metav1.DeleteOptions{})
		_ = r.cs.RbacV1().ClusterRoles().Delete(ctx, serviceClient, metav1.DeleteOptions{})
	})
	port := svc.Spec.Ports[0].Port
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: corev1.PodSpec{
			ServiceAccountName:           "agent",
			AutomountServiceAccountToken: to(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: to(true), RunAsUser: to[int64](65532), RunAsGroup: to[int64](65532),
			},
			Containers: []corev1.Container{{
				Name:  "agent",
				Image: agentImage + ":" + agentTag,
				Env: []corev1.EnvVar{
					{Name: "INFORMERD_ADDRESS", Value: fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, port)},
					{Name: "INFORMERD_SERVER_NAME", Value: serviceName},
					{Name: "INFORMERD_CA_FILE", Value: "/etc/informerd-ca/ca.crt"},
					{Name: "INFORMERD_TOKEN_FILE", Value: "/var/run/secrets/informerd/token"},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "ca", MountPath: "/etc/informerd-ca", ReadOnly: true},
					{Name: "token", MountPath: "/var/run/secrets/informerd", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
						Audience: "informerd", ExpirationSeconds: to[int64](3600), Path: "token",
					}}},
				}}},
			},
		},
	}
	created, err := r.cs.CoreV1().Pods(serviceClient).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return created
}

// serviceAgentSeesEveryPod waits for a report of the agent in which its List and its
// Informer's view both hold as many pods as the apiserver has in the whole cluster, and which
// also satisfies more; it returns that report.
func (r *realNode) serviceAgentSeesEveryPod(a *corev1.Pod, more func([]string) bool) []string {
	r.t.Helper()
	var got []string
	r.eventually("the service agent holds every pod", func() (bool, string) {
		out, err := r.run(nil, "kubectl", "logs", "-n", a.Namespace, a.Name, "--tail=1")
		if err != nil {
			return false, err.Error()
		}
		m := serviceAgentLine.FindStringSubmatch(out)
		if m == nil {
			return false, strings.TrimSpace(out)
		}
		if m[5] != "" {
			return false, m[0]
		}
		all, err := r.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, _ := strconv.Atoi(m[1])
		k, _ := strconv.Atoi(m[2])
		if n != len(all.Items) || k != n || !more(m) {
			return false, fmt.Sprintf("%s; the apiserver has %d pods", m[0], len(all.Items))
		}
		got = m
		return true, ""
	})
	return got
}

// to is a pointer to v, for the API's optional fields.
func to[T any](v T) *T { return &v }
