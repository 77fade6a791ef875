package main

// Deterministic generation of realistic workloads: a plan (namespaces, owners, pod slots) and,
// from it, the apply configurations of pods and their statuses and the owner objects.
//
// Everything that is not assigned by the API server (names, labels, specs, IPs, container IDs,
// timestamps relative to the plan's base time) is a pure function of the seed and the inputs,
// so that two runs with the same flags write the same pods.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

const (
	// fieldManager owns what the seeder applies to pods (metadata and spec).
	fieldManager = "informerd-seed"
	// statusManager owns pod status, as the kubelet does on a real node.
	statusManager = "kubelet"

	seedLabel = "informerd.io/seed"
	tierLabel = "informerd.io/tier"
	tierKeep  = "keep"
	tierDrop  = "drop"
)

// nameAlphabet is the alphabet of generated name suffixes and pod-template hashes
// (the one apimachinery's rand.String and SafeEncodeString use).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

type ownerKind int

const (
	kindReplicaSet ownerKind = iota
	kindDaemonSet
	kindStatefulSet
	kindJob
	// kindBare is no owner: pods created directly (debug shells, one-off tools), each its
	// own "owner" in the plan, with no ownerReferences.
	kindBare
)

func (k ownerKind) String() string {
	switch k {
	case kindReplicaSet:
		return "ReplicaSet"
	case kindDaemonSet:
		return "DaemonSet"
	case kindStatefulSet:
		return "StatefulSet"
	case kindJob:
		return "Job"
	case kindBare:
		return "Pod"
	}
	return "Unknown"
}

func (k ownerKind) apiVersion() string {
	switch k {
	case kindJob:
		return "batch/v1"
	case kindBare:
		return "v1"
	}
	return "apps/v1"
}

// plan is the complete, deterministic description of what `seed pods` writes.
type plan struct {
	Seed       uint64
	Nodes      int
	Base       time.Time // "now" for generated timestamps (pod start times lie before it)
	Namespaces []string
	Owners     []*owner
	Pods       int
}

// owner is one controller object (and, for ReplicaSets, its Deployment) with its pods.
type owner struct {
	Namespace    string
	Kind         ownerKind
	Name         string // the ReplicaSet, DaemonSet, StatefulSet or Job
	Deployment   string // the Deployment owning a ReplicaSet
	App          string // app.kubernetes.io/name
	Instance     string // app.kubernetes.io/instance
	Component    string // app.kubernetes.io/component
	PartOf       string
	Hash         string // pod-template-hash (RS) or controller-revision-hash (DS, STS)
	TemplateSeed uint64
	Pods         []*podSlot
	// Graceful gives pods the termination grace periods of real ones (30s and so on) instead
	// of 0. Without a kubelet to confirm it, a graceful deletion of a pod bound to a node never
	// ends: with grace periods, the pods of a deleted namespace or owner stay Terminating.
	Graceful bool

	// Assigned by the API server when the owners are created.
	UID           types.UID
	DeploymentUID types.UID
}

// podSlot is one pod of an owner.
type podSlot struct {
	Name    string
	Node    int
	Ordinal int // StatefulSet ordinal; index within the owner otherwise
	IP      int // index into the pod IP space, unique within a plan
	Seed    uint64
	Tier    string
}

// Share of pods per owner kind, in percent; ReplicaSets take the rest. Jobs have one pod
// each (as the Jobs a CronJob starts), and bare pods have no owner: 13% of pods are the only
// pod of their "owner", whose template (labels, annotations, spec) they share with no other
// pod, as in a cluster that runs CronJobs and one-replica workloads.
const (
	shareDaemonSet   = 20
	shareStatefulSet = 15
	shareJob         = 10
	shareBare        = 3
)

var (
	domains = []string{"billing", "checkout", "catalog", "search", "orders", "payments",
		"identity", "shipping", "inventory", "pricing", "reviews", "ads", "media", "chat",
		"analytics", "ledger", "fraud", "loyalty", "support", "growth"}
	services = []string{"api", "web", "worker", "gateway", "frontend", "backend", "consumer",
		"scheduler", "indexer", "sync", "notifier", "proxy", "grpc", "admin", "reporter",
		"exporter", "renderer", "importer", "cron", "events", "auth", "cache-warmer",
		"webhook", "router", "aggregator"}
	nodeAgents = []string{"node-exporter", "fluent-bit", "promtail", "csi-node", "calico-node",
		"kube-proxy", "datadog-agent", "falco", "nvidia-device-plugin", "local-volume-provisioner",
		"cilium", "ebs-csi-node", "otel-agent", "node-problem-detector", "vector"}
	statefulApps = []string{"postgres", "redis", "kafka", "zookeeper", "elasticsearch",
		"rabbitmq", "mongodb", "etcd", "cassandra", "nats", "clickhouse", "minio", "memcached",
		"vault", "consul"}
	jobTasks = []string{"db-migrate", "backup", "report", "export", "cleanup", "reindex",
		"cache-warmup", "sync", "import", "rollup", "compaction", "invoice-run"}
	bareTools = []string{"debug", "toolbox", "netshoot", "psql-client", "load-test",
		"canary-probe", "shell", "curl"}
)

// ipFor maps a pod IP index to a unique address in 10.64.0.0/10, skipping .0 and .255.
func ipFor(i int) string {
	d := i%254 + 1
	i /= 254
	c := i % 256
	i /= 256
	return fmt.Sprintf("10.%d.%d.%d", 64+i%64, c, d)
}

// maxIPIndex is the size of the pod IP space of ipFor.
const maxIPIndex = 254 * 256 * 64

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

// hostIPFor is the InternalIP of a fake node.
func hostIPFor(node string) string {
	i, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
	if err != nil || !strings.HasPrefix(node, "node-") {
		h := sha256.Sum256([]byte(node))
		i = int(h[0])<<8 | int(h[1])
	}
	// 250 nodes per /24 from 172.18.0.0 on: 64,000 nodes in 172.18.0.0/16, then 172.19...
	return fmt.Sprintf("172.%d.%d.%d", 18+(i/250/256)%14, (i/250)%256, i%250+2)
}

func randString(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = nameAlphabet[r.IntN(len(nameAlphabet))]
	}
	return string(b)
}

func randHex(r *rand.Rand, n int) string {
	b := make([]byte, (n+1)/2)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b)[:n]
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func chance(r *rand.Rand, pct int) bool { return r.IntN(100) < pct }

// newRand returns a generator for one purpose (stream) of one seed.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^0x9e3779b97f4a7c15))
}

// replicaCount draws the number of pods of a ReplicaSet, StatefulSet, Job or bare pod: about
// five per ReplicaSet and StatefulSet, one per Job (each run of a CronJob is a Job of its own)
// and per bare pod.
func replicaCount(r *rand.Rand, k ownerKind) int {
	switch k {
	case kindStatefulSet:
		return pick(r, []int{1, 2, 3, 3, 3, 3, 5, 5, 6, 7})
	case kindJob, kindBare:
		return 1
	}
	return pick(r, []int{1, 2, 3, 3, 4, 4, 5, 5, 5, 6, 6, 8, 10})
}

// newPlan lays out pods pods over namespaces namespaces named prefix-0..prefix-(n-1).
func newPlan(seed uint64, prefix string, pods, namespaces, nodes int, base time.Time) *plan {
	return newPlanWith(seed, prefix, pods, namespaces, nodes, base, false)
}

func newPlanWith(seed uint64, prefix string, pods, namespaces, nodes int, base time.Time, graceful bool) *plan {
	p := &plan{Seed: seed, Nodes: nodes, Base: base, Pods: pods}
	ip := 0
	for ns := 0; ns < namespaces; ns++ {
		name := fmt.Sprintf("%s-%d", prefix, ns)
		p.Namespaces = append(p.Namespaces, name)
		n := pods / namespaces
		if ns < pods%namespaces {
			n++
		}
		owners := planNamespace(newRand(seed, uint64(ns)+1), name, n, nodes, ownerSuffix(seed))
		for _, o := range owners {
			o.Graceful = graceful
			for _, s := range o.Pods {
				s.IP = ip
				ip++
			}
		}
		p.Owners = append(p.Owners, owners...)
	}
	return p
}

// ownerSuffix keeps the owners (and so the pods) of plans with different seeds apart, so that
// pods can be added to namespaces seeded before by seeding again with another seed: without it,
// a StatefulSet of the same name would be re-applied with other containers, which the apiserver
// refuses. The default seed (1) keeps plain names.
func ownerSuffix(seed uint64) string {
	if seed == 1 {
		return ""
	}
	return fmt.Sprintf("-g%d", seed)
}

// planNamespace lays out n pods in one namespace: DaemonSets, StatefulSets and Jobs get their
// shares, ReplicaSets the rest. suffix is appended to every owner name.
func planNamespace(r *rand.Rand, ns string, n, nodes int, suffix string) []*owner {
	want := map[ownerKind]int{
		kindDaemonSet:   n * shareDaemonSet / 100,
		kindStatefulSet: n * shareStatefulSet / 100,
		kindJob:         n * shareJob / 100,
		kindBare:        n * shareBare / 100,
	}
	want[kindReplicaSet] = n - want[kindDaemonSet] - want[kindStatefulSet] - want[kindJob] - want[kindBare]

	used := map[string]bool{} // owner and pod names in the namespace
	unique := func(base string) string {
		base += suffix
		name := base
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		used[name] = true
		return name
	}
	podName := func(prefix string) string {
		for {
			name := prefix + randString(r, 5)
			if !used[name] {
				used[name] = true
				return name
			}
		}
	}

	var owners []*owner
	for _, k := range []ownerKind{kindReplicaSet, kindDaemonSet, kindStatefulSet, kindJob, kindBare} {
		for left := want[k]; left > 0; {
			o := &owner{Namespace: ns, Kind: k, TemplateSeed: r.Uint64()}
			count := 0
			switch k {
			case kindReplicaSet:
				d := pick(r, domains)
				svc := pick(r, services)
				o.Deployment = unique(d + "-" + svc)
				o.App, o.Instance, o.Component, o.PartOf = svc, o.Deployment, componentOf(svc), d
				o.Hash = randString(r, 10)
				o.Name = o.Deployment + "-" + o.Hash
				used[o.Name] = true
				count = replicaCount(r, k)
			case kindDaemonSet:
				agent := pick(r, nodeAgents)
				o.Name = unique(agent)
				o.App, o.Instance, o.Component, o.PartOf = agent, o.Name, "agent", "platform"
				o.Hash = randString(r, 10)
				count = nodes
			case kindStatefulSet:
				app := pick(r, statefulApps)
				o.Name = unique(pick(r, domains) + "-" + app)
				o.App, o.Instance, o.Component, o.PartOf = app, o.Name, "database", strings.SplitN(o.Name, "-", 2)[0]
				o.Hash = o.Name + "-" + randString(r, 10)
				count = replicaCount(r, k)
			case kindJob:
				d := pick(r, domains)
				task := pick(r, jobTasks)
				o.Name = unique(fmt.Sprintf("%s-%s-%d", d, task, 29000000+r.IntN(900000)))
				o.App, o.Instance, o.Component, o.PartOf = task, d+"-"+task, "batch", d
				count = replicaCount(r, k)
			case kindBare:
				d := pick(r, domains)
				tool := pick(r, bareTools)
				o.Name = unique(d + "-" + tool)
				o.App, o.Instance, o.Component, o.PartOf = tool, o.Name, "tooling", d
				count = replicaCount(r, k)
			}
			count = min(count, left)
			left -= count
			firstNode := r.IntN(max(nodes, 1))
			for i := 0; i < count; i++ {
				s := &podSlot{Ordinal: i, Seed: r.Uint64(), Tier: tierKeep}
				if r.IntN(2) == 1 {
					s.Tier = tierDrop
				}
				switch k {
				case kindReplicaSet:
					s.Name = podName(o.Name + "-")
					s.Node = r.IntN(nodes)
				case kindDaemonSet:
					s.Name = podName(o.Name + "-")
					s.Node = (firstNode + i) % nodes
				case kindStatefulSet:
					s.Name = fmt.Sprintf("%s-%d", o.Name, i)
					used[s.Name] = true
					s.Node = r.IntN(nodes)
				case kindJob:
					s.Name = podName(o.Name + "-")
					s.Node = r.IntN(nodes)
				case kindBare:
					s.Name = o.Name
					s.Node = r.IntN(nodes)
				}
				o.Pods = append(o.Pods, s)
			}
			owners = append(owners, o)
		}
	}
	return owners
}

func componentOf(svc string) string {
	switch svc {
	case "web", "frontend", "renderer":
		return "frontend"
	case "worker", "consumer", "scheduler", "indexer", "importer", "cron", "events", "aggregator", "cache-warmer", "reporter":
		return "worker"
	case "gateway", "proxy", "router":
		return "gateway"
	}
	return "backend"
}

// --- pod templates ------------------------------------------------------------------------------

// template returns the pod template of an owner: the part of the pod that all its pods share.
// It is built afresh on every call, so that callers may modify it.
func (o *owner) template() *corev1ac.PodTemplateSpecApplyConfiguration {
	r := newRand(o.TemplateSeed, 1)
	// How much there is to a pod: 0 lean, 1 average, 2 rich.
	level := pick(r, []int{0, 0, 0, 0, 0, 1, 1, 1, 1, 2})
	labels := map[string]string{
		"app.kubernetes.io/name":      o.App,
		"app.kubernetes.io/instance":  o.Instance,
		"app.kubernetes.io/component": o.Component,
	}
	if chance(r, 60) {
		labels["app.kubernetes.io/part-of"] = o.PartOf
	}
	version := fmt.Sprintf("%d.%d.%d", r.IntN(4)+1, r.IntN(30), r.IntN(12))
	if chance(r, 50) {
		labels["app.kubernetes.io/version"] = version
	}
	if chance(r, 40) {
		labels["app.kubernetes.io/managed-by"] = "Helm"
		labels["helm.sh/chart"] = fmt.Sprintf("%s-%d.%d.%d", o.App, r.IntN(3), r.IntN(20), r.IntN(10))
	}
	if chance(r, 30) {
		labels["team"] = o.PartOf
	}
	if o.Kind == kindReplicaSet {
		labels["pod-template-hash"] = o.Hash
	}

	annotations := map[string]string{}
	metricsPort := int32(pick(r, []int{9090, 9100, 8081, 9102, 2112}))
	if chance(r, 55) {
		annotations["prometheus.io/scrape"] = "true"
		annotations["prometheus.io/port"] = strconv.Itoa(int(metricsPort))
		if chance(r, 50) {
			annotations["prometheus.io/path"] = "/metrics"
		}
	}
	if chance(r, 30) {
		annotations["checksum/config"] = randHex(r, 64)
	}
	if o.Kind == kindReplicaSet && chance(r, 20) {
		annotations["kubectl.kubernetes.io/restartedAt"] = time.Date(2026, 1+time.Month(r.IntN(6)),
			1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.FixedZone("", 0)).Format(time.RFC3339)
	}
	if chance(r, 10) {
		annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = pick(r, []string{"true", "false"})
	}

	spec := corev1ac.PodSpec()
	image := fmt.Sprintf("acme/%s-%s:%s", o.PartOf, o.App, version)
	if o.Kind == kindDaemonSet || o.Kind == kindStatefulSet {
		image = fmt.Sprintf("%s/%s:%s", o.App, o.App, version)
	}
	main := o.mainContainer(r, image, metricsPort, level)
	containers := append([]*corev1ac.ContainerApplyConfiguration{main}, sidecars(r, o, level)...)
	if len(containers) > 1 {
		annotations["kubectl.kubernetes.io/default-container"] = *main.Name
	}
	if (o.Kind == kindReplicaSet || o.Kind == kindStatefulSet) && chance(r, 15) {
		spec.WithInitContainers(corev1ac.Container().
			WithName(pick(r, []string{"wait-for-deps", "init-config", "migrate"})).
			WithImage("busybox:1.36.1").
			WithImagePullPolicy(corev1.PullIfNotPresent).
			WithCommand("sh", "-c", "until nc -z "+o.PartOf+"-postgres 5432; do echo waiting; sleep 2; done").
			WithResources(corev1ac.ResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}).
				WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")})))
	}

	// Volumes: a ConfigMap, scratch space, TLS material; node paths for agents.
	spec.WithVolumes(corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().
		WithName(o.Instance + "-config").WithDefaultMode(420)))
	if chance(r, []int{30, 70, 90}[level]) {
		ed := corev1ac.EmptyDirVolumeSource()
		if chance(r, 30) {
			ed.WithMedium(corev1.StorageMediumMemory).WithSizeLimit(resource.MustParse("64Mi"))
		}
		spec.WithVolumes(corev1ac.Volume().WithName("tmp").WithEmptyDir(ed))
		main.WithVolumeMounts(corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"))
	}
	if chance(r, []int{10, 40, 70}[level]) {
		spec.WithVolumes(corev1ac.Volume().WithName("tls").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(o.Instance + "-tls").WithDefaultMode(420)))
		main.WithVolumeMounts(corev1ac.VolumeMount().WithName("tls").WithMountPath("/etc/tls").WithReadOnly(true))
	}
	if o.Kind == kindDaemonSet {
		for _, hp := range [][2]string{{"varlog", "/var/log"}, {"sys", "/sys"}, {"proc", "/proc"}}[:1+r.IntN(3)] {
			spec.WithVolumes(corev1ac.Volume().WithName(hp[0]).WithHostPath(corev1ac.HostPathVolumeSource().
				WithPath(hp[1]).WithType(corev1.HostPathDirectory)))
			main.WithVolumeMounts(corev1ac.VolumeMount().WithName(hp[0]).WithMountPath("/host" + hp[1]).WithReadOnly(true))
		}
	}
	if o.Kind == kindStatefulSet {
		main.WithVolumeMounts(corev1ac.VolumeMount().WithName("data").WithMountPath("/var/lib/" + o.App))
	}

	// Pod-level settings.
	spec.WithServiceAccountName("default").
		WithDNSPolicy(corev1.DNSClusterFirst).
		WithSchedulerName("default-scheduler").
		WithTerminationGracePeriodSeconds(0)
	if grace := int64(pick(r, []int{30, 30, 30, 30, 60, 10, 120})); o.Graceful {
		spec.WithTerminationGracePeriodSeconds(grace)
	}
	switch o.Kind {
	case kindJob:
		spec.WithRestartPolicy(pick(r, []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}))
	default:
		spec.WithRestartPolicy(corev1.RestartPolicyAlways)
	}
	if chance(r, 50) {
		spec.WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithFSGroup(2000).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	}
	if chance(r, 40) {
		spec.WithNodeSelector(map[string]string{"kubernetes.io/os": "linux"})
	}
	if chance(r, 20) {
		spec.WithEnableServiceLinks(false)
	}
	if chance(r, 15) {
		spec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName("registry-credentials"))
	}
	if chance(r, 20) {
		spec.WithTolerations(corev1ac.Toleration().WithKey("dedicated").WithOperator(corev1.TolerationOpEqual).
			WithValue(o.PartOf).WithEffect(corev1.TaintEffectNoSchedule))
	}
	switch o.Kind {
	case kindDaemonSet:
		if chance(r, 40) {
			spec.WithPriorityClassName("system-node-critical")
		}
	default:
		if chance(r, 5) {
			spec.WithPriorityClassName("system-cluster-critical")
		}
	}
	selector := metav1ac.LabelSelector().WithMatchLabels(map[string]string{
		"app.kubernetes.io/name": o.App, "app.kubernetes.io/instance": o.Instance})
	if o.Kind == kindReplicaSet && chance(r, 20) {
		spec.WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().WithWeight(100).
				WithPodAffinityTerm(corev1ac.PodAffinityTerm().WithLabelSelector(selector).
					WithTopologyKey("kubernetes.io/hostname")))))
	}
	if (o.Kind == kindReplicaSet || o.Kind == kindStatefulSet) && chance(r, 15) {
		spec.WithTopologySpreadConstraints(corev1ac.TopologySpreadConstraint().WithMaxSkew(1).
			WithTopologyKey("topology.kubernetes.io/zone").WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(selector))
	}
	if chance(r, 15) {
		annotations["kubectl.kubernetes.io/last-applied-configuration"] = lastApplied(o, labels, image, main)
	}

	// WithContainers copies the containers: add them once they are complete.
	spec.WithContainers(containers...)
	t := corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(spec)
	if len(annotations) > 0 {
		t.WithAnnotations(annotations)
	}
	return t
}

var (
	plainEnv = [][2]string{
		{"LOG_LEVEL", "info"}, {"LOG_FORMAT", "json"}, {"ENVIRONMENT", "production"},
		{"REGION", "eu-west-1"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability:4317"},
		{"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "0.05"},
		{"CACHE_TTL_SECONDS", "300"}, {"MAX_CONNECTIONS", "200"}, {"HTTP_TIMEOUT", "15s"},
		{"FEATURE_FLAGS", "new-checkout,async-invoices,fast-search"}, {"TZ", "UTC"},
		{"KAFKA_BROKERS", "kafka-0.kafka-headless:9092,kafka-1.kafka-headless:9092,kafka-2.kafka-headless:9092"},
		{"REDIS_URL", "redis://redis-master:6379/0"}, {"JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=75 -XX:+UseG1GC"},
		{"NODE_OPTIONS", "--max-old-space-size=512"}, {"GRPC_GO_RETRY", "on"}, {"WORKERS", "4"},
		{"SENTRY_ENVIRONMENT", "prod"}, {"METRICS_ENABLED", "true"},
	}
	fieldEnv = [][2]string{
		{"POD_NAME", "metadata.name"}, {"POD_NAMESPACE", "metadata.namespace"},
		{"POD_IP", "status.podIP"}, {"NODE_NAME", "spec.nodeName"}, {"HOST_IP", "status.hostIP"},
		{"SERVICE_ACCOUNT", "spec.serviceAccountName"},
	}
	cpuSizes = []string{"10m", "25m", "50m", "100m", "100m", "200m", "250m", "500m", "1", "2"}
	memSizes = []string{"32Mi", "64Mi", "128Mi", "128Mi", "256Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
)

func (o *owner) mainContainer(r *rand.Rand, image string, metricsPort int32, level int) *corev1ac.ContainerApplyConfiguration {
	name := o.App
	if chance(r, 30) {
		name = "app"
	}
	port := int32(pick(r, []int{8080, 8080, 8000, 3000, 5000, 9000}))
	switch o.App {
	case "postgres":
		port = 5432
	case "redis":
		port = 6379
	case "kafka":
		port = 9092
	case "mongodb":
		port = 27017
	case "zookeeper":
		port = 2181
	}
	c := corev1ac.Container().WithName(name).WithImage(image).
		WithImagePullPolicy(pick(r, []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullIfNotPresent, corev1.PullAlways}))
	if level > 0 && chance(r, 50) {
		c.WithArgs("--port="+strconv.Itoa(int(port)), "--metrics-port="+strconv.Itoa(int(metricsPort)),
			"--config=/etc/"+o.App+"/config.yaml")
	}
	c.WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(port).WithProtocol(corev1.ProtocolTCP))
	if metricsPort != port {
		c.WithPorts(corev1ac.ContainerPort().WithName("metrics").WithContainerPort(metricsPort).WithProtocol(corev1.ProtocolTCP))
	}
	if chance(r, 25) && port != 9000 && metricsPort != 9000 {
		c.WithPorts(corev1ac.ContainerPort().WithName("grpc").WithContainerPort(9000).WithProtocol(corev1.ProtocolTCP))
	}

	// Environment: downward API references, plain settings, secrets and config map keys.
	for _, f := range fieldEnv[:[]int{0, 1, 2}[level]+r.IntN([]int{2, 3, 5}[level])] {
		c.WithEnv(corev1ac.EnvVar().WithName(f[0]).WithValueFrom(corev1ac.EnvVarSource().
			WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(f[1]))))
	}
	perm := r.Perm(len(plainEnv))
	for _, i := range perm[:[]int{0, 1, 3}[level]+r.IntN([]int{3, 5, 7}[level])] {
		c.WithEnv(corev1ac.EnvVar().WithName(plainEnv[i][0]).WithValue(plainEnv[i][1]))
	}
	c.WithEnv(corev1ac.EnvVar().WithName("PORT").WithValue(strconv.Itoa(int(port))))
	if level > 0 && chance(r, 40) {
		c.WithEnv(corev1ac.EnvVar().WithName("GOMAXPROCS").WithValueFrom(corev1ac.EnvVarSource().
			WithResourceFieldRef(corev1ac.ResourceFieldSelector().WithResource("limits.cpu").WithDivisor(resource.MustParse("1")))))
	}
	if level > 0 && chance(r, 60) {
		c.WithEnv(corev1ac.EnvVar().WithName("DATABASE_PASSWORD").WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(o.Instance + "-db").WithKey("password"))))
	}
	if level > 1 && chance(r, 50) {
		c.WithEnv(corev1ac.EnvVar().WithName("API_KEY").WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(o.Instance + "-api").WithKey("key").WithOptional(true))))
	}
	if level > 0 && chance(r, 30) {
		c.WithEnv(corev1ac.EnvVar().WithName("UPSTREAM_URL").WithValueFrom(corev1ac.EnvVarSource().
			WithConfigMapKeyRef(corev1ac.ConfigMapKeySelector().WithName(o.Instance + "-config").WithKey("upstream"))))
	}
	if chance(r, 20) {
		c.WithEnvFrom(corev1ac.EnvFromSource().WithConfigMapRef(corev1ac.ConfigMapEnvSource().WithName(o.PartOf + "-shared")))
	}

	cpu := r.IntN(len(cpuSizes))
	mem := r.IntN(len(memSizes))
	res := corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpuSizes[cpu]),
		corev1.ResourceMemory: resource.MustParse(memSizes[mem]),
	})
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memSizes[min(mem+r.IntN(2), len(memSizes)-1)])}
	if chance(r, 40) {
		limits[corev1.ResourceCPU] = resource.MustParse(cpuSizes[min(cpu+1+r.IntN(2), len(cpuSizes)-1)])
	}
	c.WithResources(res.WithLimits(limits))

	switch {
	case o.Kind == kindStatefulSet:
		c.WithLivenessProbe(corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString("http"))).
			WithInitialDelaySeconds(30).WithPeriodSeconds(10).WithTimeoutSeconds(5).WithSuccessThreshold(1).WithFailureThreshold(6))
		c.WithReadinessProbe(corev1ac.Probe().WithExec(corev1ac.ExecAction().WithCommand("/bin/sh", "-c", "exec "+o.App+"-healthcheck --local")).
			WithInitialDelaySeconds(5).WithPeriodSeconds(10).WithTimeoutSeconds(5).WithSuccessThreshold(1).WithFailureThreshold(3))
	case o.Kind == kindJob && chance(r, 70):
		// batch pods rarely have probes
	case level == 0:
		c.WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").
			WithPort(intstr.FromString("http")).WithScheme(corev1.URISchemeHTTP)).
			WithPeriodSeconds(10).WithTimeoutSeconds(1).WithSuccessThreshold(1).WithFailureThreshold(3))
	default:
		c.WithLivenessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").
			WithPort(intstr.FromString("http")).WithScheme(corev1.URISchemeHTTP)).
			WithInitialDelaySeconds(int32(pick(r, []int{0, 5, 10, 15, 30}))).WithPeriodSeconds(10).
			WithTimeoutSeconds(int32(1 + r.IntN(5))).WithSuccessThreshold(1).WithFailureThreshold(3))
		c.WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(pick(r, []string{"/ready", "/readyz", "/health/ready"})).
			WithPort(intstr.FromString("http")).WithScheme(corev1.URISchemeHTTP)).
			WithPeriodSeconds(5).WithTimeoutSeconds(1).WithSuccessThreshold(1).WithFailureThreshold(3))
		if chance(r, 20) {
			c.WithStartupProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").
				WithPort(intstr.FromString("http")).WithScheme(corev1.URISchemeHTTP)).
				WithPeriodSeconds(5).WithTimeoutSeconds(1).WithSuccessThreshold(1).WithFailureThreshold(30))
		}
	}
	c.WithVolumeMounts(corev1ac.VolumeMount().WithName("config").WithMountPath("/etc/" + o.App).WithReadOnly(true))
	if level > 0 && chance(r, 50) {
		c.WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).WithRunAsNonRoot(true).WithRunAsUser(10001).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	}
	c.WithTerminationMessagePath("/dev/termination-log")
	if chance(r, 20) {
		c.WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	} else {
		c.WithTerminationMessagePolicy(corev1.TerminationMessageReadFile)
	}
	return c
}

// sidecars returns 0-2 sidecar containers.
func sidecars(r *rand.Rand, o *owner, level int) []*corev1ac.ContainerApplyConfiguration {
	n := pick(r, [][]int{{0}, {0, 0, 0, 1}, {0, 1, 1, 2}}[level])
	if o.Kind == kindJob || o.Kind == kindDaemonSet {
		n = min(n, 1)
	}
	var out []*corev1ac.ContainerApplyConfiguration
	kinds := r.Perm(3)
	for _, k := range kinds[:n] {
		small := corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")})
		var c *corev1ac.ContainerApplyConfiguration
		switch k {
		case 0:
			c = corev1ac.Container().WithName("envoy").WithImage("envoyproxy/envoy:v1.31.2").
				WithArgs("-c", "/etc/envoy/envoy.yaml", "--service-cluster", o.Instance, "--log-level", "warn").
				WithPorts(corev1ac.ContainerPort().WithName("envoy-admin").WithContainerPort(15000).WithProtocol(corev1.ProtocolTCP),
					corev1ac.ContainerPort().WithName("envoy-outbound").WithContainerPort(15001).WithProtocol(corev1.ProtocolTCP)).
				WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/ready").
					WithPort(intstr.FromInt32(15000)).WithScheme(corev1.URISchemeHTTP)).WithPeriodSeconds(5).
					WithTimeoutSeconds(1).WithSuccessThreshold(1).WithFailureThreshold(3))
		case 1:
			c = corev1ac.Container().WithName("log-shipper").WithImage("fluent/fluent-bit:3.1.9").
				WithEnv(corev1ac.EnvVar().WithName("FLUENT_ELASTICSEARCH_HOST").WithValue("logs-es-http.logging"),
					corev1ac.EnvVar().WithName("FLUENT_ELASTICSEARCH_PORT").WithValue("9200"))
		case 2:
			c = corev1ac.Container().WithName("oauth2-proxy").WithImage("oauth2-proxy/oauth2-proxy:v7.7.1").
				WithArgs("--provider=oidc", "--upstream=http://127.0.0.1:8080", "--http-address=0.0.0.0:4180",
					"--email-domain=*", "--cookie-secure=true").
				WithPorts(corev1ac.ContainerPort().WithName("proxy").WithContainerPort(4180).WithProtocol(corev1.ProtocolTCP)).
				WithEnv(corev1ac.EnvVar().WithName("OAUTH2_PROXY_CLIENT_SECRET").WithValueFrom(corev1ac.EnvVarSource().
					WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(o.Instance + "-oauth").WithKey("client-secret"))))
		}
		c.WithImagePullPolicy(corev1.PullIfNotPresent).WithResources(small).
			WithTerminationMessagePath("/dev/termination-log").
			WithTerminationMessagePolicy(corev1.TerminationMessageReadFile)
		out = append(out, c)
	}
	return out
}

// lastApplied renders a few hundred bytes of kubectl's last-applied-configuration.
func lastApplied(o *owner, labels map[string]string, image string, main *corev1ac.ContainerApplyConfiguration) string {
	kind, api := "Deployment", "apps/v1"
	switch o.Kind {
	case kindDaemonSet:
		kind = "DaemonSet"
	case kindStatefulSet:
		kind = "StatefulSet"
	case kindJob:
		kind, api = "Job", "batch/v1"
	case kindBare:
		kind, api = "Pod", "v1"
	}
	name := o.Name
	if o.Kind == kindReplicaSet {
		name = o.Deployment
	}
	l := map[string]string{}
	for k, v := range labels {
		if k != "pod-template-hash" {
			l[k] = v
		}
	}
	var ports []map[string]any
	for _, p := range main.Ports {
		ports = append(ports, map[string]any{"containerPort": *p.ContainerPort, "name": *p.Name})
	}
	doc := map[string]any{
		"apiVersion": api, "kind": kind,
		"metadata": map[string]any{"annotations": map[string]any{}, "labels": l, "name": name, "namespace": o.Namespace},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": l},
			"spec": map[string]any{"containers": []any{map[string]any{
				"image": image, "name": *main.Name, "ports": ports,
				"resources": map[string]any{"requests": main.Resources.Requests, "limits": main.Resources.Limits},
			}}},
		}},
	}
	b, _ := json.Marshal(doc) // maps marshal with sorted keys: deterministic
	return string(b) + "\n"
}

// --- pods --------------------------------------------------------------------------------------

func ownerRef(o *owner) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion(o.Kind.apiVersion()).WithKind(o.Kind.String()).
		WithName(o.Name).WithUID(o.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// podApply returns the apply configuration of one pod (metadata and spec) as its controller
// would have created it and the scheduler bound it.
func (o *owner) podApply(s *podSlot) *corev1ac.PodApplyConfiguration {
	t := o.template()
	p := corev1ac.Pod(s.Name, o.Namespace).
		WithLabels(t.Labels).
		WithSpec(t.Spec)
	if o.Kind != kindBare {
		p.WithOwnerReferences(ownerRef(o))
	}
	if len(t.Annotations) > 0 {
		p.WithAnnotations(t.Annotations)
	}
	p.WithLabels(map[string]string{tierLabel: s.Tier})
	node := nodeName(s.Node)
	p.Spec.WithNodeName(node)
	switch o.Kind {
	case kindReplicaSet, kindJob:
		p.WithGenerateName(o.Name + "-")
	case kindDaemonSet:
		p.WithGenerateName(o.Name + "-")
		p.WithLabels(map[string]string{"controller-revision-hash": o.Hash, "pod-template-generation": "1"})
		p.Spec.WithAffinity(corev1ac.Affinity().WithNodeAffinity(corev1ac.NodeAffinity().
			WithRequiredDuringSchedulingIgnoredDuringExecution(corev1ac.NodeSelector().WithNodeSelectorTerms(
				corev1ac.NodeSelectorTerm().WithMatchFields(corev1ac.NodeSelectorRequirement().
					WithKey("metadata.name").WithOperator(corev1.NodeSelectorOpIn).WithValues(node))))))
		// The tolerations the DaemonSet controller adds.
		p.Spec.WithTolerations(
			corev1ac.Toleration().WithKey("node.kubernetes.io/not-ready").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoExecute),
			corev1ac.Toleration().WithKey("node.kubernetes.io/unreachable").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoExecute),
			corev1ac.Toleration().WithKey("node.kubernetes.io/disk-pressure").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule),
			corev1ac.Toleration().WithKey("node.kubernetes.io/memory-pressure").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule),
			corev1ac.Toleration().WithKey("node.kubernetes.io/pid-pressure").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule),
			corev1ac.Toleration().WithKey("node.kubernetes.io/unschedulable").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule))
	case kindStatefulSet:
		p.WithLabels(map[string]string{
			"controller-revision-hash":           o.Hash,
			"statefulset.kubernetes.io/pod-name": s.Name,
			"apps.kubernetes.io/pod-index":       strconv.Itoa(s.Ordinal),
		})
		p.Spec.WithHostname(s.Name).WithSubdomain(o.Name + "-headless")
		p.Spec.WithVolumes(corev1ac.Volume().WithName("data").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName("data-" + s.Name)))
	}
	if o.Kind == kindJob {
		uid := string(o.UID)
		p.WithLabels(map[string]string{
			"batch.kubernetes.io/controller-uid": uid,
			"batch.kubernetes.io/job-name":       o.Name,
			"controller-uid":                     uid,
			"job-name":                           o.Name,
		})
	}
	return p
}

// seedStartTime is when a seeded pod started: a minute to 30 days before base.
func seedStartTime(seed uint64, base time.Time) time.Time {
	r := newRand(seed, 5)
	return base.Add(-time.Minute - time.Duration(r.Int64N(int64(30*24*time.Hour)))).Truncate(time.Second)
}

// podStatus returns the status a kubelet reports for a running pod p on its node, which it
// started at start. No time in it lies after now; containers of pods up for more than an
// hour may have restarted.
func podStatus(p *corev1ac.PodApplyConfiguration, ip string, seed uint64, start, now time.Time) *corev1ac.PodApplyConfiguration {
	r := newRand(seed, 2)
	start = start.Truncate(time.Second)
	maxSec := max(int(now.Sub(start)/time.Second), 0)
	at := func(sec int) metav1.Time {
		return metav1.NewTime(start.Add(time.Duration(min(sec, maxSec)) * time.Second))
	}
	node := ""
	if p.Spec != nil && p.Spec.NodeName != nil {
		node = *p.Spec.NodeName
	}
	hostIP := hostIPFor(node)
	ready := 3 + r.IntN(40)
	cond := func(t corev1.PodConditionType, sec int) *corev1ac.PodConditionApplyConfiguration {
		return corev1ac.PodCondition().WithType(t).WithStatus(corev1.ConditionTrue).
			WithObservedGeneration(1).WithLastTransitionTime(at(sec))
	}
	st := corev1ac.PodStatus().
		WithObservedGeneration(1).
		WithPhase(corev1.PodRunning).
		WithConditions(
			cond(corev1.PodReadyToStartContainers, 2),
			cond(corev1.PodInitialized, 1),
			cond(corev1.PodReady, ready),
			cond(corev1.ContainersReady, ready),
			cond(corev1.PodScheduled, 0)).
		WithHostIP(hostIP).WithHostIPs(corev1ac.HostIP().WithIP(hostIP)).
		WithPodIP(ip).WithPodIPs(corev1ac.PodIP().WithIP(ip)).
		WithStartTime(at(0))
	if p.Spec != nil {
		for _, c := range p.Spec.InitContainers {
			st.WithInitContainerStatuses(corev1ac.ContainerStatus().WithName(*c.Name).
				WithState(corev1ac.ContainerState().WithTerminated(corev1ac.ContainerStateTerminated().
					WithExitCode(0).WithReason("Completed").WithStartedAt(at(1)).WithFinishedAt(at(2)).
					WithContainerID("containerd://" + randHex(r, 64)))).
				WithReady(true).WithRestartCount(0).WithImage(*c.Image).WithImageID(imageID(*c.Image)).
				WithContainerID("containerd://" + randHex(r, 64)).WithStarted(false))
		}
		for i := range p.Spec.Containers {
			st.WithContainerStatuses(containerStatus(r, &p.Spec.Containers[i], at, ready, maxSec))
		}
	}
	return corev1ac.Pod(*p.Name, *p.Namespace).WithStatus(st)
}

func containerStatus(r *rand.Rand, c *corev1ac.ContainerApplyConfiguration, at func(int) metav1.Time, ready, maxSec int) *corev1ac.ContainerStatusApplyConfiguration {
	cs := corev1ac.ContainerStatus().WithName(*c.Name).
		WithReady(true).WithStarted(true).
		WithImage(*c.Image).WithImageID(imageID(*c.Image)).
		WithContainerID("containerd://" + randHex(r, 64))
	started := ready - 1
	if chance(r, 12) && maxSec > 3600 {
		restarts := 1 + r.IntN(12)
		started = min(started+300*restarts, maxSec-1)
		cs.WithRestartCount(int32(restarts)).
			WithLastTerminationState(corev1ac.ContainerState().WithTerminated(terminated(r, at(started-300), at(started-1))))
	} else {
		cs.WithRestartCount(0)
	}
	cs.WithState(corev1ac.ContainerState().WithRunning(corev1ac.ContainerStateRunning().WithStartedAt(at(started))))
	return cs
}

func terminated(r *rand.Rand, from, to metav1.Time) *corev1ac.ContainerStateTerminatedApplyConfiguration {
	t := corev1ac.ContainerStateTerminated().WithStartedAt(from).WithFinishedAt(to).
		WithContainerID("containerd://" + randHex(r, 64))
	switch r.IntN(3) {
	case 0:
		t.WithExitCode(137).WithReason("OOMKilled")
	case 1:
		t.WithExitCode(1).WithReason("Error")
	default:
		t.WithExitCode(143).WithReason("Error")
	}
	return t
}

// imageID is the digest a runtime reports for an image (stable per image reference).
func imageID(image string) string {
	h := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(h[:])
}

// --- owner objects -----------------------------------------------------------------------------

// templateObject converts an owner's pod template to the typed API object.
func (o *owner) templateObject() (corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	b, err := json.Marshal(o.template())
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	return t, err
}

func (o *owner) ownerLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      o.App,
		"app.kubernetes.io/instance":  o.Instance,
		"app.kubernetes.io/component": o.Component,
		"app.kubernetes.io/part-of":   o.PartOf,
	}
}

func (o *owner) selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{
		"app.kubernetes.io/name":     o.App,
		"app.kubernetes.io/instance": o.Instance,
	}}
}

func ptr[T any](v T) *T { return &v }

func (o *owner) deploymentObject() (*appsv1.Deployment, error) {
	t, err := o.templateObject()
	if err != nil {
		return nil, err
	}
	delete(t.Labels, "pod-template-hash")
	maxSurge, maxUnavailable := intstr.FromString("25%"), intstr.FromString("25%")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: o.Deployment, Namespace: o.Namespace, Labels: o.ownerLabels(),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(len(o.Pods))),
			Selector: o.selector(),
			Template: t,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}},
			RevisionHistoryLimit:    ptr(int32(10)),
			ProgressDeadlineSeconds: ptr(int32(600)),
		},
	}, nil
}

func (o *owner) replicaSetObject() (*appsv1.ReplicaSet, error) {
	t, err := o.templateObject()
	if err != nil {
		return nil, err
	}
	sel := o.selector()
	sel.MatchLabels["pod-template-hash"] = o.Hash
	labels := o.ownerLabels()
	labels["pod-template-hash"] = o.Hash
	n := strconv.Itoa(len(o.Pods))
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: labels,
			Annotations: map[string]string{
				"deployment.kubernetes.io/desired-replicas": n,
				"deployment.kubernetes.io/max-replicas":     strconv.Itoa(len(o.Pods) + (len(o.Pods)+3)/4),
				"deployment.kubernetes.io/revision":         "1",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: o.Deployment,
				UID: o.DeploymentUID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(len(o.Pods))), Selector: sel, Template: t},
	}, nil
}

func (o *owner) daemonSetObject() (*appsv1.DaemonSet, error) {
	t, err := o.templateObject()
	if err != nil {
		return nil, err
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.ownerLabels(),
			Annotations: map[string]string{"deprecated.daemonset.template.generation": "1"}},
		Spec: appsv1.DaemonSetSpec{Selector: o.selector(), Template: t, RevisionHistoryLimit: ptr(int32(10))},
	}, nil
}

func (o *owner) statefulSetObject() (*appsv1.StatefulSet, error) {
	t, err := o.templateObject()
	if err != nil {
		return nil, err
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.ownerLabels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(len(o.Pods))),
			Selector:    o.selector(),
			Template:    t,
			ServiceName: o.Name + "-headless",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
		},
	}, nil
}

func (o *owner) jobObject() (*batchv1.Job, error) {
	t, err := o.templateObject()
	if err != nil {
		return nil, err
	}
	n := int32(len(o.Pods))
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.ownerLabels()},
		Spec: batchv1.JobSpec{Parallelism: ptr(n), Completions: ptr(n), BackoffLimit: ptr(int32(6)),
			Template: t},
	}, nil
}
