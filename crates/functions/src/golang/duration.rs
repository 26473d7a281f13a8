//! Go's `time.ParseDuration`, for the `ttl` fields of function inputs (`1m`, `1m30s`,
//! `1.5h`, `300ms`): the workspace's one parser, from `oxplane-machinery`. A negative TTL
//! parses in Go but means nothing, so [`parse`] refuses it.

pub use oxplane_machinery::golang::duration::{DurationError, parse, parse_nanos};
