package main

// `seed dump`: the pods a plan would write, as the API server would list them, without a
// cluster. The output is what `kubectl get pods -A -o json` prints (a List of Pods), the input
// of `informerd bench` and of the store benchmarks: a corpus at any size in seconds, and one
// more realistic than a freshly seeded cluster can be, because the API server sets
// creationTimestamp to the time of the create (seeded pods share it by the hundred), while a
// long-lived cluster's pods were created over weeks.
//
// What the API server would add is added here the way it adds it: the API defaults
// (k8s.io/kubernetes' own defaulting functions), what its admission plugins set
// (ServiceAccount: the kube-api-access-xxxxx projected volume and its mounts;
// DefaultTolerationSeconds; Priority), the QoS class, and uid, resourceVersion, generation and
// creationTimestamp. Not added: managedFields (informerd's profiles all drop them), so the
// "full JSON" figures of a dump are about 40% below those of the same pods listed from a
// cluster.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// dumpBase is the default "now" of a dump: fixed, so that the same flags write the same file.
var dumpBase = time.Date(2026, 6, 15, 4, 14, 53, 0, time.UTC)

func runDump(args []string) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	var (
		pods       = fs.Int("pods", 1000, "number of pods")
		namespaces = fs.Int("namespaces", 10, "number of namespaces to spread them over")
		prefix     = fs.String("prefix", "seed", "namespace name prefix: namespaces are PREFIX-0..PREFIX-(M-1)")
		seed       = fs.Uint64("seed", 1, "seed of the generator: the same seed writes the same pods")
		nodes      = fs.Int("nodes", 20, "number of (fake) node names pods are bound to")
		out        = fs.String("out", "-", "output file (- is standard output)")
		base       = fs.String("now", dumpBase.Format(time.RFC3339), "the time the dump is taken at (RFC 3339): every time in it lies before")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pods < 0 || *namespaces < 1 || *nodes < 1 {
		return usageError(fs, "--pods must be >= 0, --namespaces and --nodes >= 1")
	}
	if !isDNSLabelPrefix(*prefix) {
		return usageError(fs, "--prefix %q is not a valid namespace name prefix", *prefix)
	}
	now, err := time.Parse(time.RFC3339, *base)
	if err != nil {
		return usageError(fs, "--now: %v", err)
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	w := io.Writer(os.Stdout)
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	p := newPlan(*seed, *prefix, *pods, *namespaces, *nodes, now.UTC())
	if err := writeDump(bw, p); err != nil {
		return err
	}
	return bw.Flush()
}

// writeDump writes the plan's pods as one List, a pod per line.
func writeDump(w io.Writer, p *plan) error {
	assignUIDs(p)
	if _, err := io.WriteString(w, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"},\"items\":[\n"); err != nil {
		return err
	}
	i := 0
	for _, o := range p.Owners {
		for _, s := range o.Pods {
			pod, err := listedPod(p, o, s, i)
			if err != nil {
				return err
			}
			b, err := json.Marshal(pod)
			if err != nil {
				return err
			}
			if i > 0 {
				if _, err := io.WriteString(w, ",\n"); err != nil {
					return err
				}
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			i++
		}
	}
	_, err := io.WriteString(w, "\n]}\n")
	return err
}

// assignUIDs gives the owners the UIDs the API server would have given them on creation.
func assignUIDs(p *plan) {
	for _, o := range p.Owners {
		r := newRand(o.TemplateSeed, 8)
		o.UID = randUID(r)
		if o.Kind == kindReplicaSet {
			o.DeploymentUID = randUID(r)
		}
	}
}

// randUID is a random (version 4) UUID, as the API server's uuid.NewUUID.
func randUID(r *rand.Rand) types.UID {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// listedPod is the i-th pod of the plan as a list from the API server returns it.
func listedPod(p *plan, o *owner, s *podSlot, i int) (*corev1.Pod, error) {
	planned, err := planPod(p, o, s)
	if err != nil {
		return nil, err
	}
	return planned.listed(s, i)
}

// plannedPod is what the seeder writes of one pod: its apply configuration, and its status as
// the kubelet reports it (in a Pod).
type plannedPod struct {
	apply  *corev1ac.PodApplyConfiguration
	status corev1.Pod
	start  time.Time
}

func planPod(p *plan, o *owner, s *podSlot) (*plannedPod, error) {
	pp := &plannedPod{apply: o.podApply(s), start: seedStartTime(s.Seed, p.Base)}
	if err := convert(podStatus(pp.apply, ipFor(s.IP), s.Seed, pp.start, p.Base), &pp.status); err != nil {
		return nil, err
	}
	return pp, nil
}

// listed is the pod, the i-th of its plan, as a list from the API server returns it.
func (pp *plannedPod) listed(s *podSlot, i int) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := convert(pp.apply, &pod); err != nil {
		return nil, err
	}
	pod.Status = *pp.status.Status.DeepCopy() // defaulted below; the plan's stays as planned
	r := newRand(s.Seed, 7)
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.UID = randUID(r)
	// Created a moment before it was scheduled and started.
	pod.CreationTimestamp = metav1.NewTime(pp.start.Add(-time.Duration(r.IntN(3)) * time.Second))
	pod.Generation = 1
	// etcd revisions: unique, increasing in creation order, gaps for the writes in between.
	pod.ResourceVersion = strconv.Itoa(1_000_000 + 3*i + r.IntN(3))
	admit(&pod, r)
	corev1defaults.SetObjectDefaults_Pod(&pod)
	pod.Status.QOSClass = qos.ComputePodQOS(&pod)
	return &pod, nil
}

// The path the ServiceAccount admission plugin mounts the API credentials at.
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// admit does what the API server's admission plugins do to a new pod: ServiceAccount (the
// projected token volume, named with a random suffix, mounted in every container),
// DefaultTolerationSeconds and Priority.
func admit(pod *corev1.Pod, r *rand.Rand) {
	spec := &pod.Spec
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = "default"
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		name := "kube-api-access-" + randString(r, 5)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o644)), Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr(int64(3607)), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}},
		}})
		mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: serviceAccountMountPath}
		for i := range spec.InitContainers {
			spec.InitContainers[i].VolumeMounts = append(spec.InitContainers[i].VolumeMounts, mount)
		}
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, mount)
		}
	}
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		has := false
		for _, t := range spec.Tolerations {
			has = has || (t.Key == key && t.Effect == corev1.TaintEffectNoExecute)
		}
		if !has {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))})
		}
	}
	priority := int32(0)
	switch spec.PriorityClassName {
	case "system-node-critical":
		priority = 2000001000
	case "system-cluster-critical":
		priority = 2000000000
	}
	spec.Priority = &priority
	spec.PreemptionPolicy = ptr(corev1.PreemptLowerPriority)
}
