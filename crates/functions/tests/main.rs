//! Integration tests of oxplane-functions: one binary, one module per area.

mod grpc;
