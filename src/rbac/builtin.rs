//! The plural and scope of every built-in Kubernetes kind, from the API types of the release the
//! project builds against (k8s-openapi, `v1_36`): what `informerd rbac` needs to name a resource
//! in an RBAC rule without asking a cluster.
//!
//! Decision: a table from the generated API types, not a guess from the kind. Kubernetes' own
//! `UnsafeGuessKindToResource` (lowercase, then `-s`/`-es`/`-ies`) is wrong for kinds such as
//! `Endpoints`, and a wrong plural would be a rule that grants nothing; a custom resource's
//! plural is whatever its CRD says. So a kind outside this table is an error, never a guess.
//! Kinds are looked up by group and kind, not version: RBAC rules name groups and resources, and
//! a built-in kind keeps its plural and scope across versions.

use std::any::TypeId;

use k8s_openapi::{
    api::{
        admissionregistration::v1 as admissionregistration, apps::v1 as apps,
        autoscaling::v2 as autoscaling, batch::v1 as batch, certificates::v1 as certificates,
        coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
        events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking,
        node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, resource::v1 as resource,
        scheduling::v1 as scheduling, storage::v1 as storage,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions,
    kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration,
    NamespaceResourceScope, Resource,
};

use super::Kind;

/// A row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BuiltinKind {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

fn entry<T: Resource + 'static>() -> BuiltinKind {
    BuiltinKind {
        group: T::GROUP,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
    }
}

macro_rules! kinds {
    ($($t:ty),* $(,)?) => { [$(entry::<$t>()),*] };
}

/// The built-in kind `kind` of `group`, if there is one.
pub fn lookup(group: &str, kind: &str) -> Option<Kind> {
    table()
        .into_iter()
        .find(|k| k.group == group && k.kind == kind)
        .map(|k| Kind {
            group: k.group.into(),
            plural: k.plural.into(),
            namespaced: k.namespaced,
        })
}

/// Every listable kind of the stable API groups, one version each.
fn table() -> impl IntoIterator<Item = BuiltinKind> {
    kinds![
        core::ConfigMap,
        core::Endpoints,
        core::Event,
        core::LimitRange,
        core::Namespace,
        core::Node,
        core::PersistentVolume,
        core::PersistentVolumeClaim,
        core::Pod,
        core::PodTemplate,
        core::ReplicationController,
        core::ResourceQuota,
        core::Secret,
        core::Service,
        core::ServiceAccount,
        admissionregistration::MutatingAdmissionPolicy,
        admissionregistration::MutatingAdmissionPolicyBinding,
        admissionregistration::MutatingWebhookConfiguration,
        admissionregistration::ValidatingAdmissionPolicy,
        admissionregistration::ValidatingAdmissionPolicyBinding,
        admissionregistration::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition,
        apiregistration::APIService,
        apps::ControllerRevision,
        apps::DaemonSet,
        apps::Deployment,
        apps::ReplicaSet,
        apps::StatefulSet,
        autoscaling::HorizontalPodAutoscaler,
        batch::CronJob,
        batch::Job,
        certificates::CertificateSigningRequest,
        coordination::Lease,
        discovery::EndpointSlice,
        events::Event,
        flowcontrol::FlowSchema,
        flowcontrol::PriorityLevelConfiguration,
        networking::IPAddress,
        networking::Ingress,
        networking::IngressClass,
        networking::NetworkPolicy,
        networking::ServiceCIDR,
        node::RuntimeClass,
        policy::PodDisruptionBudget,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        rbac::Role,
        rbac::RoleBinding,
        resource::DeviceClass,
        resource::ResourceClaim,
        resource::ResourceClaimTemplate,
        resource::ResourceSlice,
        scheduling::PriorityClass,
        storage::CSIDriver,
        storage::CSINode,
        storage::CSIStorageCapacity,
        storage::StorageClass,
        storage::VolumeAttachment,
        storage::VolumeAttributesClass,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_scopes_come_from_the_api_types() {
        let kind = |group: &str, plural: &str, namespaced| Kind {
            group: group.into(),
            plural: plural.into(),
            namespaced,
        };
        assert_eq!(lookup("", "Endpoints"), Some(kind("", "endpoints", true)));
        assert_eq!(
            lookup("networking.k8s.io", "NetworkPolicy"),
            Some(kind("networking.k8s.io", "networkpolicies", true))
        );
        assert_eq!(lookup("", "Node"), Some(kind("", "nodes", false)));
        assert_eq!(
            lookup("apps", "Deployment"),
            Some(kind("apps", "deployments", true))
        );
        // A kind in the wrong group, or a custom resource, is not guessed.
        assert_eq!(lookup("", "Deployment"), None);
        assert_eq!(lookup("example.com", "Widget"), None);
    }
}
