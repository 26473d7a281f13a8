//! oxplane's built-in providers: managed-resource kinds and their external clients, run by
//! the runtime's managed-resource reconciler.
