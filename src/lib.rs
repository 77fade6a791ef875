//! informerd: one filtered, field-stripped cache of Kubernetes objects, shared over gRPC.
