package main

// `seed nodes --etcd URL --nodes N`: N Node objects (node-0 .. node-(N-1), the names seeded pods
// are bound to) written straight into the API server's etcd, as `seed pods --etcd` writes pods
// (etcd.go): for `make bench-nvsentinel`, 100,000 GPU nodes in a few minutes.
//
// Each node is what a GPU node of a large cluster reports, about 13 KB of JSON as listed (the
// size published for such clusters' nodes): the well-known labels, the GPU feature discovery
// and node feature discovery labels, the annotations the kubelet, the CSI driver and NFD add,
// a podCIDR and providerID, capacity and allocatable with GPUs, the kubelet's conditions and
// per-GPU health conditions, addresses, nodeInfo, and the images the node holds (most of the
// size). managedFields record the kubelet's metadata and status updates and the node-ipam
// controller's podCIDR, computed with the API server's structured-merge-diff schema.
//
// Decision: every node has the same label and annotation keys (values differ), so one node's
// kubelet's field sets are every node's: they are computed once (nodeEncoder.fields) and
// checked against a fresh computation for other nodes by TestEveryNodeManagesTheSameFields.
// The node-ipam controller's names the node's own podCIDR and is computed per node.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

// etcdNodesPrefix is where kube-apiserver keeps nodes (under their old name, minions).
const etcdNodesPrefix = "/registry/minions/"

func runNodes(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	var (
		nodes       = fs.Int("nodes", 1000, "number of nodes to write: node-0 .. node-(N-1)")
		seed        = fs.Uint64("seed", 1, "seed of the generator: the same seed writes the same nodes")
		concurrency = fs.Int("concurrency", 64, "writes in flight")
		etcd        = fs.String("etcd", "", "the API server's etcd client URL (required): nodes are written straight into it")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *concurrency < 1 {
		return usageError(fs, "--nodes and --concurrency must be >= 1")
	}
	if *etcd == "" {
		return usageError(fs, "--etcd is required: the client URL of the API server's etcd")
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcd}, DialTimeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("connecting to etcd at %s: %w", *etcd, err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, etcdNodesPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd at %s (the --etcd flag) does not answer: %w", *etcd, err)
	}
	start := time.Now()
	enc := newNodeEncoder()
	var written, bytesJSON atomic.Int64
	stop := progress(5*time.Second, func(el time.Duration) string {
		return fmt.Sprintf("seed: %5.1fs nodes %d/%d", el.Seconds(), written.Load(), *nodes)
	})
	defer stop()
	err = parallel(ctx, *concurrency, *nodes, func(ctx context.Context, _, i int) error {
		node := plannedNode(*seed, i, start.UTC())
		value, size, err := enc.stored(node)
		if err != nil {
			return err
		}
		put := func() error { _, err := cli.Put(ctx, etcdNodesPrefix+node.Name, string(value)); return err }
		if err := retry(ctx, put); err != nil {
			return fmt.Errorf("writing node %s to etcd: %w", node.Name, err)
		}
		written.Add(1)
		bytesJSON.Add(int64(size))
		return nil
	})
	stop()
	if err != nil {
		return err
	}
	elapsed := time.Since(start).Seconds()
	fmt.Printf("seeded %d nodes of %.0f bytes of JSON each in %.1fs (%.1f nodes/s)\n",
		*nodes, float64(bytesJSON.Load())/float64(*nodes), elapsed, float64(*nodes)/elapsed)
	return nil
}

// nodeEncoder turns planned nodes into what kube-apiserver stores.
type nodeEncoder struct {
	codec runtime.Encoder
	types managedfields.TypeConverter

	once   sync.Once
	fields [3]*metav1.FieldsV1 // kubelet (metadata), node-ipam (spec, the first node's), kubelet (status)
	err    error
}

func newNodeEncoder() *nodeEncoder {
	return &nodeEncoder{
		codec: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		types: applyconfigurations.NewTypeConverter(scheme.Scheme),
	}
}

// stored is the node as kube-apiserver stores it, and the size of its JSON as listed.
func (e *nodeEncoder) stored(node *corev1.Node) ([]byte, int, error) {
	e.once.Do(func() { e.fields, e.err = e.managedFields(node) })
	if e.err != nil {
		return nil, 0, e.err
	}
	ipam, err := e.ipamFields(node)
	if err != nil {
		return nil, 0, err
	}
	created := node.CreationTimestamp
	later := metav1.NewTime(created.Add(40 * time.Second))
	node.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: statusManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &created, FieldsType: "FieldsV1", FieldsV1: e.fields[0]},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &created, FieldsType: "FieldsV1", FieldsV1: ipam},
		{Manager: statusManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &later, FieldsType: "FieldsV1", FieldsV1: e.fields[2], Subresource: "status"},
	}
	var buf bytes.Buffer
	if err := e.codec.Encode(node, &buf); err != nil {
		return nil, 0, fmt.Errorf("encoding node %s: %w", node.Name, err)
	}
	size := 0
	if raw, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), node); err == nil {
		size = len(raw)
	}
	return buf.Bytes(), size, nil
}

// managedFields are the field sets of a node's three writers: the kubelet's registration
// (labels and annotations), the node-ipam controller's podCIDR (and the TTL annotation the
// ttl controller sets), and the kubelet's status.
func (e *nodeEncoder) managedFields(node *corev1.Node) ([3]*metav1.FieldsV1, error) {
	var out [3]*metav1.FieldsV1
	meta := &corev1.Node{TypeMeta: nodeType, ObjectMeta: metav1.ObjectMeta{Labels: node.Labels, Annotations: map[string]string{}}}
	for k, v := range node.Annotations {
		if k != ttlAnnotation {
			meta.Annotations[k] = v
		}
	}
	status := &corev1.Node{TypeMeta: nodeType, Status: node.Status}
	var err error
	if out[0], err = e.updated(meta); err != nil {
		return out, fmt.Errorf("managedFields of node %s: %w", node.Name, err)
	}
	if out[1], err = e.ipamFields(node); err != nil {
		return out, err
	}
	if out[2], err = e.updated(status); err != nil {
		return out, fmt.Errorf("managedFields of node %s: %w", node.Name, err)
	}
	return out, nil
}

// ipamFields are the node-ipam controller's: podCIDRs is a set, so its entry names the node's
// own CIDR, and is computed for every node.
func (e *nodeEncoder) ipamFields(node *corev1.Node) (*metav1.FieldsV1, error) {
	fields, err := e.updated(&corev1.Node{TypeMeta: nodeType,
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ttlAnnotation: node.Annotations[ttlAnnotation]}},
		Spec:       corev1.NodeSpec{PodCIDR: node.Spec.PodCIDR, PodCIDRs: node.Spec.PodCIDRs}})
	if err != nil {
		return nil, fmt.Errorf("managedFields of node %s: %w", node.Name, err)
	}
	return fields, nil
}

// updated are the fields an update to part records, as the API server records an update: those
// that differ from the empty object (so a zero-valued struct field, such as daemonEndpoints in
// a metadata update, is not recorded).
func (e *nodeEncoder) updated(part *corev1.Node) (*metav1.FieldsV1, error) {
	before, err := e.types.ObjectToTyped(&corev1.Node{TypeMeta: nodeType})
	if err != nil {
		return nil, err
	}
	after, err := e.types.ObjectToTyped(part)
	if err != nil {
		return nil, err
	}
	diff, err := before.Compare(after)
	if err != nil {
		return nil, err
	}
	return fieldsV1(diff.Added.Union(diff.Modified))
}

var nodeType = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}

const ttlAnnotation = "node.alpha.kubernetes.io/ttl"

var (
	zones     = []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"}
	gpuHealth = []string{"GpuMemWatch", "GpuNvlinkWatch", "GpuPcieWatch", "SysLogsXIDError"}
	// nodeImages are the images a GPU node's runtime holds: the per-node agents' and a few
	// workloads' (the node's status.images, most of a node's size).
	nodeImages = []string{
		"nvcr.io/nvidia/driver:570.133.20-ubuntu22.04", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
		"nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04", "nvcr.io/nvidia/gpu-feature-discovery:v0.17.1",
		"nvcr.io/nvidia/k8s/container-toolkit:v1.17.5-ubuntu20.04", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0",
		"ghcr.io/nvidia/nvsentinel/gpu-health-monitor:v0.4.1", "ghcr.io/nvidia/nvsentinel/syslog-health-monitor:v0.4.1",
		"registry.k8s.io/kube-proxy:v1.36.0", "registry.k8s.io/pause:3.10", "quay.io/cilium/cilium:v1.17.3",
		"nvcr.io/nvidia/pytorch:25.03-py3",
	}

	cpuFeatures = []string{"AVX512F", "AMXBF16", "AVX512FP16", "VAES"}
)

// plannedNode is the i-th node of a seed, as the API server would list it (without a
// resourceVersion: that is the revision of the etcd write).
func plannedNode(seed uint64, i int, base time.Time) *corev1.Node {
	r := newRand(seed, 1<<40|uint64(i))
	name := nodeName(i)
	zone := zones[i%len(zones)]
	instance := "i-0" + randHex(r, 16)
	created := metav1.NewTime(base.Add(-time.Minute - time.Duration(r.Int64N(int64(90*24*time.Hour)))).Truncate(time.Second))
	ip := hostIPFor(name)
	labels := map[string]string{
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
		"node.kubernetes.io/instance-type": "p5.48xlarge", "beta.kubernetes.io/instance-type": "p5.48xlarge",
		"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
		"failure-domain.beta.kubernetes.io/region": "us-east-1", "failure-domain.beta.kubernetes.io/zone": zone,
		"topology.k8s.aws/network-node-layer-1": "nn-" + randHex(r, 17), "topology.k8s.aws/network-node-layer-2": "nn-" + randHex(r, 17),
		"topology.k8s.aws/network-node-layer-3": "nn-" + randHex(r, 17),
		"eks.amazonaws.com/nodegroup":           fmt.Sprintf("gpu-h100-%d", i/1000), "eks.amazonaws.com/capacityType": "ON_DEMAND",
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
		"nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.machine": "p5.48xlarge",
		"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.replicas": "1",
		"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.mode": "compute",
		"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "133", "nvidia.com/cuda.driver.rev": "20",
		"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "8",
		"nvidia.com/cuda.driver-version.full": "570.133.20", "nvidia.com/cuda.runtime-version.full": "12.8",
		"nvidia.com/gfd.timestamp": strconv.FormatInt(created.Unix()+120, 10),
		"nvidia.com/mig.capable":   "true", "nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-disabled",
		"nvidia.com/mig.config.state": "success", "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
		"dgxc.nvidia.com/nvsentinel-state": "healthy",
	}
	for _, c := range []string{"driver", "device-plugin", "dcgm-exporter", "operator-validator"} {
		labels["nvidia.com/gpu.deploy."+c] = "true"
	}
	var nfd []string
	for _, f := range cpuFeatures {
		labels["feature.node.kubernetes.io/cpu-cpuid."+f] = "true"
		nfd = append(nfd, "cpu-cpuid."+f)
	}
	for k, v := range map[string]string{"kernel-version.major": "6", "kernel-version.minor": "8", "kernel-version.full": "6.8.0-1024-aws",
		"system-os_release.ID": "ubuntu", "system-os_release.VERSION_ID": "22.04", "pci-10de.present": "true", "pci-1d0f.present": "true",
		"cpu-model.vendor_id": "Intel", "cpu-model.family": "6", "cpu-model.id": "143", "cpu-hardware_multithreading": "true",
		"memory-numa": "true", "storage-nonrotationaldisk": "true", "rdma.available": "true", "rdma.capable": "true"} {
		labels["feature.node.kubernetes.io/"+k] = v
		nfd = append(nfd, k)
	}
	annotations := map[string]string{
		ttlAnnotation: "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"csi.volume.kubernetes.io/nodeid":                        `{"ebs.csi.aws.com":"` + instance + `","fsx.csi.aws.com":"` + instance + `"}`,
		"alpha.kubernetes.io/provided-node-ip":                   ip,
		"nfd.node.kubernetes.io/feature-labels":                  strings.Join(nfd, ","),
		"nfd.node.kubernetes.io/extended-resources":              "",
		"nvidia.com/gpu-driver-upgrade-enabled":                  "true",
		"nvidia.com/gpu-driver-upgrade.driver-pod-hash":          randString(r, 10),
		"io.cilium.network.ipv4-cilium-host":                     strings.TrimSuffix(podCIDR(i), "/26"),
		"io.cilium.network.ipv4-pod-cidr":                        podCIDR(i),
	}
	gpus := resource.MustParse("8")
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2097152000Ki"),
		corev1.ResourceEphemeralStorage: resource.MustParse("3750000000Ki"), corev1.ResourcePods: resource.MustParse("110"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("42Gi"),
		"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": resource.MustParse("32"),
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceCPU] = resource.MustParse("191450m")
	allocatable[corev1.ResourceMemory] = resource.MustParse("2051145728Ki")
	allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("3455750614968")
	heartbeat := metav1.NewTime(base.Add(-time.Duration(r.IntN(50)) * time.Second).Truncate(time.Second))
	cond := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: msg,
			LastHeartbeatTime: heartbeat, LastTransitionTime: metav1.NewTime(created.Add(30 * time.Second))}
	}
	conditions := []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
	for _, h := range gpuHealth {
		conditions = append(conditions, cond(corev1.NodeConditionType(h), corev1.ConditionFalse, h+"IsHealthy", "No Health Failures"))
	}
	var images []corev1.ContainerImage
	for j, img := range nodeImages {
		repo := img[:strings.LastIndex(img, ":")]
		images = append(images, corev1.ContainerImage{
			Names:     []string{repo + "@sha256:" + randHex(newRand(uint64(j), 9), 64), img},
			SizeBytes: 10_000_000 + int64(newRand(uint64(j), 10).IntN(9_000_000_000)),
		})
	}
	return &corev1.Node{
		TypeMeta: nodeType,
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: randUID(r), CreationTimestamp: created,
			Labels: labels, Annotations: annotations},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR(i), PodCIDRs: []string{podCIDR(i)},
			ProviderID: "aws:///" + zone + "/" + instance},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable, Conditions: conditions,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalDNS, Address: "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: randHex(r, 32), SystemUUID: strings.ToUpper(randHex(r, 8)) + "-" + randHex(r, 4) + "-" + randHex(r, 4) + "-" + randHex(r, 4) + "-" + randHex(r, 12),
				BootID: string(randUID(r)), KernelVersion: "6.8.0-1024-aws", OSImage: "Ubuntu 22.04.5 LTS",
				ContainerRuntimeVersion: "containerd://1.7.27", KubeletVersion: "v1.36.0",
				//lint:ignore SA1019 no longer set by kubelets, still carried by the nodes of long-lived clusters (and by this benchmark's recorded runs)
				KubeProxyVersion: "v1.36.0",
				OperatingSystem:  "linux", Architecture: "amd64"},
			Images: images,
		},
	}
}

// podCIDR is node i's /26 of 10.128.0.0/9 (64 addresses, room for its DaemonSet pods; 131,072
// nodes).
func podCIDR(i int) string {
	a := i * 64
	return fmt.Sprintf("10.%d.%d.%d/26", 128+(a>>16)%128, (a>>8)&255, a&255)
}
