//! One admission review: the AdmissionReview the apiserver sends for a pod being created, and
//! the AdmissionReview answered, in kube's admission types: allowed unchanged, allowed with
//! the patch that injects the sidecar, or refused (`Invalid`, code 400) with the message that
//! names the annotation to fix.

use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::Status;

use super::annotations::Request;
use super::patch::{injected, patch};
use super::Sidecar;

/// The reason and code of a refused pod: its annotations are invalid, as an invalid field of
/// the pod would be.
const REFUSED_REASON: &str = "Invalid";
const REFUSED_CODE: u16 = 400;

/// Answers the AdmissionReview in `body` (JSON); a body that is not one is answered with an
/// invalid response naming what is wrong.
pub fn review(body: &[u8], sidecar: &Sidecar) -> Vec<u8> {
    let response = match serde_json::from_slice::<AdmissionReview<Pod>>(body)
        .map_err(|e| format!("the request is not an AdmissionReview of a Pod: {e}"))
        .and_then(|review| {
            review
                .try_into()
                .map_err(|_| "the AdmissionReview holds no request".to_string())
        }) {
        Ok(request) => respond(&request, sidecar),
        Err(message) => AdmissionResponse::invalid(message),
    };
    serde_json::to_vec(&response.into_review()).expect("an AdmissionReview serializes")
}

/// The answer to one pod's creation.
fn respond(request: &AdmissionRequest<Pod>, sidecar: &Sidecar) -> AdmissionResponse {
    let allowed = AdmissionResponse::from(request);
    // Decision: only creations are changed. A pod's containers cannot be added to afterwards;
    // the webhook configurations register CREATE alone, and anything else is let through.
    let Some(pod) = request.object.as_ref() else {
        return allowed;
    };
    // A pod injected already (or with informerd added by hand) is left as it is, whatever its
    // annotations say.
    if request.operation != Operation::Create || injected(pod) {
        return allowed;
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let config_map = match Request::of(pod.metadata.annotations.as_ref(), namespace) {
        Ok(Request::Nothing) => return allowed,
        Ok(Request::Inject { config_map }) => config_map,
        Err(message) => {
            tracing::info!(namespace, name = pod_name(pod, request), %message, "refused a pod");
            let mut refused = allowed.deny(&message);
            refused.result = Status::failure(&message, REFUSED_REASON).with_code(REFUSED_CODE);
            return refused;
        }
    };
    let Some(patch) = patch(pod, &config_map, sidecar) else {
        return allowed;
    };
    tracing::info!(
        namespace,
        name = pod_name(pod, request),
        config_map,
        "injected informerd"
    );
    let message = "the patch serializes";
    allowed.with_patch(patch).expect(message)
}

/// The pod's name, or its generateName (a ReplicaSet's pods are named by the apiserver after
/// admission).
fn pod_name<'a>(pod: &'a Pod, request: &'a AdmissionRequest<Pod>) -> &'a str {
    pod.metadata
        .name
        .as_deref()
        .or(pod.metadata.generate_name.as_deref())
        .unwrap_or(&request.name)
}
