//! What the server says about itself: gRPC health checking, whose status follows the fleet's
//! synced signal (readiness), and server reflection over the Cache and health protos.
//!
//! Health: the overall service ("") and `informerd.v1.Cache` are SERVING once every scope has
//! synced, NOT_SERVING before, and NOT_SERVING again once the API stops.

use tokio::sync::watch as signal;
use tokio::task::JoinHandle;
use tonic::service::Routes;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::api::ApiError;
use crate::fleet::SyncedWatch;
use crate::proto;

/// The services health checks report on: the server as a whole, and the Cache service.
const SERVICES: [&str; 2] = ["", "informerd.v1.Cache"];

/// Adds the health service to `routes`, NOT_SERVING until [`follow_readiness`] sees every
/// scope synced; returns its reporter for that.
pub async fn add_health(routes: Routes) -> (Routes, HealthReporter) {
    let (health, service) = tonic_health::server::health_reporter();
    report(&health, ServingStatus::NotServing).await;
    (routes.add_service(service), health)
}

/// Adds server reflection, v1 and v1alpha, over the Cache and health protos.
pub fn add_reflection(routes: Routes) -> Result<Routes, ApiError> {
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    Ok(routes
        .add_service(builder().build_v1()?)
        .add_service(builder().build_v1alpha()?))
}

/// Keeps the health status on SERVING while the fleet is synced and NOT_SERVING otherwise,
/// until `stopped` fires: then NOT_SERVING, for good.
pub fn follow_readiness(
    health: HealthReporter,
    mut synced: SyncedWatch,
    mut stopped: signal::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ready = synced.is_synced();
        loop {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            report(&health, status).await;
            tokio::select! {
                now = synced.changed() => ready = now,
                _ = stopped.changed() => {
                    // Shutting down: not ready any more.
                    report(&health, ServingStatus::NotServing).await;
                    return;
                }
            }
        }
    })
}

async fn report(health: &HealthReporter, status: ServingStatus) {
    for service in SERVICES {
        health.set_service_status(service, status).await;
    }
}
