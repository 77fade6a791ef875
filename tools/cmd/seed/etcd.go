package main

// `seed pods --etcd URL`: the pods written straight into the API server's storage, for
// corpora of hundreds of thousands of pods. Through the API server the seeder writes about 65
// pods a second on two cores (an apply and a status patch each, both through admission, the
// field manager and a JSON round trip): 500,000 pods would take over two hours. Written here
// they take a minute or two, and the API server serves them exactly as if it had written them:
// it reads what it stores (a protobuf-encoded v1 object under /registry/pods/NS/NAME, its
// resourceVersion the etcd revision of the write), whether a watch of its own saw the write
// or not.
//
// Each pod is the one `seed pods` would have written through the API server, built the way
// `seed dump` builds it (dump.go: the API defaults, what the admission plugins add, the QoS
// class, a uid, generation, creationTimestamp), plus the managedFields the API server's field
// manager would have recorded for the seeder's apply (manager informerd-seed) and the kubelet's
// status patch (manager kubelet), computed from the same structured-merge-diff schema it uses.
//
// Decision: the owner objects (Deployments, ReplicaSets, ...) are not written. Pods carry the
// ownerReferences and uids their owners would have, as in a dump; nothing the benchmarks
// measure reads the owners. A control plane with the garbage collector running would delete
// such pods (their owners are absent), so this mode is for a control plane without it:
// `make bench-large` starts one (`cluster up --controllers`).

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// etcdPodsPrefix is where kube-apiserver (default --etcd-prefix /registry) keeps pods.
const etcdPodsPrefix = "/registry/pods/"

// podEncoder turns planned pods into what kube-apiserver stores.
type podEncoder struct {
	codec runtime.Encoder
	types managedfields.TypeConverter
	// applied holds, per owner, the fields of its pods' apply (*metav1.FieldsV1).
	//
	// Decision: computed once per owner, not per pod. The fields an apply sets are the keys of
	// its body, and every pod of an owner is applied from the same template: they differ in
	// values (name, node, uids), never in which fields are set
	// (TestEveryPodOfAnOwnerAppliesTheSameFields checks it for every kind). The apply's field
	// set was over half of the seeder's CPU, and millions of DaemonSet pods
	// (`make bench-nvsentinel`) share a handful of owners.
	applied sync.Map
}

func newPodEncoder() *podEncoder {
	return &podEncoder{
		codec: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		types: applyconfigurations.NewTypeConverter(scheme.Scheme),
	}
}

// stored is the i-th pod of the plan as kube-apiserver would store it: its etcd key and value.
func (e *podEncoder) stored(p *plan, o *owner, s *podSlot, i int) (string, []byte, error) {
	// Planned once, for both the pod and its managedFields.
	planned, err := planPod(p, o, s)
	if err != nil {
		return "", nil, err
	}
	pod, err := planned.listed(s, i)
	if err != nil {
		return "", nil, err
	}
	// The API server never stores a resourceVersion: it is the revision of the etcd write.
	pod.ResourceVersion = ""
	if pod.ManagedFields, err = e.managedFields(o, planned, pod.CreationTimestamp); err != nil {
		return "", nil, fmt.Errorf("managedFields of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var buf bytes.Buffer
	if err := e.codec.Encode(pod, &buf); err != nil {
		return "", nil, fmt.Errorf("encoding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return etcdPodsPrefix + pod.Namespace + "/" + pod.Name, buf.Bytes(), nil
}

// notManaged are the fields the API server's field manager never records as anyone's.
var notManaged = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
)

// managedFields are the two entries a seeded pod carries: the seeder's apply of metadata and
// spec (the fields of the apply body), and the kubelet's update of the status subresource a
// moment later (the fields that update added, as the API server records an update).
func (e *podEncoder) managedFields(o *owner, planned *plannedPod, created metav1.Time) ([]metav1.ManagedFieldsEntry, error) {
	applyV1, err := e.ownerApplyFields(o, planned)
	if err != nil {
		return nil, err
	}
	// An update's fields are those that differ between the objects before and after it, as
	// typed structs (so the conditions' lastProbeTime, null, is among them, as it is in the
	// API server's record).
	before, err := e.types.ObjectToTyped(&corev1.Pod{TypeMeta: podType})
	if err != nil {
		return nil, err
	}
	after, err := e.types.ObjectToTyped(&corev1.Pod{TypeMeta: podType, Status: planned.status.Status})
	if err != nil {
		return nil, err
	}
	update, err := before.Compare(after)
	if err != nil {
		return nil, err
	}
	statusV1, err := fieldsV1(update.Added.Union(update.Modified))
	if err != nil {
		return nil, err
	}
	statusAt := metav1.NewTime(created.Add(2 * time.Second))
	return []metav1.ManagedFieldsEntry{
		{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
			Time: &created, FieldsType: "FieldsV1", FieldsV1: applyV1},
		{Manager: statusManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &statusAt, FieldsType: "FieldsV1", FieldsV1: statusV1, Subresource: "status"},
	}, nil
}

var podType = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

// ownerApplyFields are the fields of the apply of o's pods: planned's, computed for the first
// pod of o the encoder sees (see applied).
func (e *podEncoder) ownerApplyFields(o *owner, planned *plannedPod) (*metav1.FieldsV1, error) {
	if v, ok := e.applied.Load(o); ok {
		return v.(*metav1.FieldsV1), nil
	}
	v1, err := e.applyFields(planned)
	if err != nil {
		return nil, err
	}
	e.applied.Store(o, v1)
	return v1, nil
}

// applyFields are the fields of one pod's apply: the body's, read as the field manager reads
// it (only what it sets).
func (e *podEncoder) applyFields(planned *plannedPod) (*metav1.FieldsV1, error) {
	var body map[string]any
	if err := convert(planned.apply, &body); err != nil {
		return nil, err
	}
	body["apiVersion"], body["kind"] = podType.APIVersion, podType.Kind
	applied, err := e.types.ObjectToTyped(&unstructured.Unstructured{Object: body})
	if err != nil {
		return nil, err
	}
	set, err := applied.ToFieldSet()
	if err != nil {
		return nil, err
	}
	return fieldsV1(set)
}

// fieldsV1 is set as managedFields records it.
func fieldsV1(set *fieldpath.Set) (*metav1.FieldsV1, error) {
	raw, err := set.Difference(notManaged).ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}

// writePodsToEtcd writes every pod of the plan to the etcd at endpoint, on s.concurrency
// goroutines. A pod already there is replaced.
//
// Decision: one put per pod, not transactions of many: every write in a transaction has the
// same revision, and so the pods would share their resourceVersion, which in a cluster is
// unique per pod (and a shared one would flatter a cache that interns strings).
func (s *seeder) writePodsToEtcd(ctx context.Context, endpoint string) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{endpoint},
		DialTimeout:        10 * time.Second,
		MaxCallSendMsgSize: 64 << 20,
	})
	if err != nil {
		return fmt.Errorf("connecting to etcd at %s: %w", endpoint, err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, etcdPodsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd at %s (the --etcd flag) does not answer: %w", endpoint, err)
	}
	assignUIDs(s.plan)
	var refs []podRef
	for _, o := range s.plan.Owners {
		for _, slot := range o.Pods {
			refs = append(refs, podRef{o, slot})
		}
	}
	enc := newPodEncoder()
	return parallel(ctx, s.concurrency, len(refs), func(ctx context.Context, _, i int) error {
		key, value, err := enc.stored(s.plan, refs[i].o, refs[i].s, i)
		if err != nil {
			return err
		}
		if err := retry(ctx, func() error { _, err := cli.Put(ctx, key, string(value)); return err }); err != nil {
			return fmt.Errorf("writing pod %s to etcd: %w", key, err)
		}
		s.pods.Add(1)
		return nil
	})
}
