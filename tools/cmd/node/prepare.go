package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// PauseImage is the sandbox image containerd runs for every pod; `make node` builds it from
// Kubernetes' pause.c and each node imports it (there is no registry to pull it from).
const PauseImage = "pause:informerd"

// kernelTunables are the sysctls the kubelet sets at start when they differ from what it wants
// (pkg/kubelet/cm: setupKernelTunables). They are not namespaced: inside the node each is a
// bind-mounted copy of the host's file, so that the kubelet's writes stay in the node.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// prepare writes one node's directory: its configuration, credentials and the directories its
// /run, /var/lib and /var/log are mounted from.
func prepare(c nodeConfig, p pki) error {
	for _, d := range []string{"root/run", "root/var/lib", "root/var/log", "sysctl", "cni/net.d", "etc"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	for _, t := range kernelTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", t))
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.path("sysctl", filepath.Base(t)), b, 0o644); err != nil {
			return err
		}
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.APIPort)
	if _, err := p.kubeconfig(c.Name+"-kubelet", "system:node:"+c.Name, []string{"system:nodes"}, server); err != nil {
		return err
	}
	if _, err := p.kubeconfig(c.Name+"-kube-proxy", "system:kube-proxy", nil, server); err != nil {
		return err
	}
	files := map[string]string{
		"etc/containerd.toml": fmt.Sprintf(`# containerd of node %[1]s (node up writes it)
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]
  # Not the host's /opt/containerd.
  [plugins.'io.containerd.internal.v1.opt']
    path = "/var/lib/containerd-opt"

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[2]q

  [plugins.'io.containerd.cri.v1.runtime']
    # The machine may deny lowering a process's oom_score_adj (no CAP_SYS_RESOURCE): ask for
    # no score below containerd's own.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[3]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[4]q]
      conf_dir = %[5]q
`, c.Name, PauseImage, filepath.Join(c.Bin, "runc"), c.Bin, c.path("cni/net.d")),

		"cni/net.d/10-informerd.conflist": mustJSON(map[string]any{
			"cniVersion": "1.0.0",
			"name":       "informerd-local",
			"plugins": []any{
				map[string]any{
					"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
					"ipam": map[string]any{
						"type":   "host-local",
						"ranges": []any{[]any{map[string]any{"subnet": c.PodCIDR}}},
						"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
					},
				},
				map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
			},
		}),

		"etc/kubelet.yaml": fmt.Sprintf(`# kubelet of node %[1]s (node up writes it)
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine's cgroups are v1, which the kubelet refuses unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
# Each node's pods under a cgroup of its own, which node down removes.
cgroupRoot: %[2]s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: 0.0.0.0
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]q}
authorization:
  mode: Webhook
clusterDomain: cluster.local
failSwapOn: false
# Not the host's /usr/libexec/kubernetes.
volumePluginDir: /var/lib/kubelet/volume-plugins
# No CAP_SYS_RESOURCE: the kubelet cannot lower its own score.
oomScoreAdj: 0
# A shared machine's disk: evict only when it is really full.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podPidsLimit: -1
`, c.Name, c.CgroupRoot, c.KubeletPort, p.caCert()),

		"etc/kube-proxy.yaml": fmt.Sprintf(`# kube-proxy of node %[1]s (node up writes it)
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[2]q
hostnameOverride: %[1]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: 0.0.0.0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# No CAP_SYS_RESOURCE; and the conntrack table's size is the host's (not namespaced): leave
# both as they are.
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.Name, filepath.Join(filepath.Dir(c.Dir), "pki", c.Name+"-kube-proxy.kubeconfig"), podNetwork),
	}
	for name, content := range files {
		if err := os.WriteFile(c.path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.path("node.json"), b, 0o644)
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

func readNodeConfig(path string) (nodeConfig, error) {
	var c nodeConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}
