package main

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// fieldValidation is the fieldValidation parameter of apply requests. The typed client's
// Apply and ApplyStatus cannot set it and leave the server default (Warn), with which the
// API server parses every apply body a second time, strictly, to look for unknown and
// duplicate fields: about 8% of its CPU time when seeding. The generated pods are checked
// against the API's validation by the unit tests, so the seeder turns that off by default.
var fieldValidation = metav1.FieldValidationIgnore

// applyPod server-side applies pa to the pod, or with status to its status subresource: the
// request client-go's typed Apply/ApplyStatus send (the apply configuration as JSON,
// application/apply-patch+yaml, force), plus the fieldValidation parameter.
func applyPod(ctx context.Context, pods typedcorev1.PodInterface, pa *corev1ac.PodApplyConfiguration, manager string, status bool) (*corev1.Pod, error) {
	if pa == nil || pa.Name == nil {
		return nil, fmt.Errorf("apply configuration without a name")
	}
	body, err := json.Marshal(pa)
	if err != nil {
		return nil, fmt.Errorf("encoding apply configuration: %w", err)
	}
	opts := metav1.PatchOptions{FieldManager: manager, Force: ptr(true), FieldValidation: fieldValidation}
	if status {
		return pods.Patch(ctx, *pa.Name, types.ApplyPatchType, body, opts, "status")
	}
	return pods.Patch(ctx, *pa.Name, types.ApplyPatchType, body, opts)
}

// applyPodQuietly is applyPod without decoding the pod the API server returns, for the
// seeder, which has no use for it. The status is written the way the kubelet writes it: a
// strategic merge patch to the status subresource (an Update entry in managedFields), which
// costs the apiserver about a quarter less than an apply.
func applyPodQuietly(ctx context.Context, c kubernetes.Interface, pa *corev1ac.PodApplyConfiguration, manager string, status bool) error {
	if pa == nil || pa.Name == nil || pa.Namespace == nil {
		return fmt.Errorf("apply configuration without a name or namespace")
	}
	rc := c.CoreV1().RESTClient()
	if status {
		body, err := kubeletStatusPatch(pa.Status)
		if err != nil {
			return fmt.Errorf("encoding status: %w", err)
		}
		opts := metav1.PatchOptions{FieldManager: manager, FieldValidation: fieldValidation}
		return rc.Patch(types.StrategicMergePatchType).Namespace(*pa.Namespace).Resource("pods").Name(*pa.Name).
			SubResource("status").VersionedParams(&opts, scheme.ParameterCodec).Body(body).Do(ctx).Error()
	}
	body, err := json.Marshal(pa)
	if err != nil {
		return fmt.Errorf("encoding apply configuration: %w", err)
	}
	opts := metav1.PatchOptions{FieldManager: manager, Force: ptr(true), FieldValidation: fieldValidation}
	return rc.Patch(types.ApplyPatchType).Namespace(*pa.Namespace).Resource("pods").Name(*pa.Name).
		VersionedParams(&opts, scheme.ParameterCodec).Body(body).Do(ctx).Error()
}

// kubeletStatusPatch is the strategic merge patch of the status subresource that reports st.
// podIPs and hostIPs are lists merged by IP: merged into the lists of a pod that churn gave a
// new IP (a StatefulSet pod recreated under its name), the planned IP would be added beside
// the current one, which the API server rejects ("may specify no more than one IP for each
// IP family"). The kubelet reports the whole list, so the patch replaces those lists.
func kubeletStatusPatch(st *corev1ac.PodStatusApplyConfiguration) ([]byte, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	for _, list := range []string{"podIPs", "hostIPs"} {
		if items, ok := fields[list].([]any); ok {
			fields[list] = append([]any{map[string]any{"$patch": "replace"}}, items...)
		}
	}
	return json.Marshal(map[string]any{"status": fields})
}
