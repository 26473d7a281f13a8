//! `Warning` headers, which kubectl prints (unknown fields dropped under
//! `fieldValidation=Warn`, for instance).

use axum::http::HeaderValue;
use axum::response::Response;

/// Adds `Warning: 299 - "..."` headers.
pub fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append("Warning", value);
        }
    }
    response
}
