//! oxplane's controller toolkit, on kube-rs: what every controller of the control plane is
//! built from, and the managed-resource reconciler providers plug their external clients into.
