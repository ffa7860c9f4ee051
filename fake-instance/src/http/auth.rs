//! Device tokens on the HTTP API: every route needs `Authorization: Bearer <token>` with one of
//! the instance's device tokens (the CLI calls the API as the device token's own user), and a
//! path may need a scope of that token.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::reply::detail;

/// What the token check reads of the API's state.
pub trait TokenSource: Clone + Send + Sync + 'static {
    /// The device tokens, in order (`device-N` is the N-th).
    fn tokens(&self) -> &[String];
    /// A token's scopes; `None`: every scope.
    fn token_scopes(&self, token: &str) -> Option<Vec<String>>;
    /// The scope a path needs, beyond `/mcp`'s.
    fn route_scope(&self, path: &str) -> Option<&str>;
    /// Misbehaving (`instance.http.device_token`): a known device token is refused on
    /// `/api/v1/instance`.
    fn refuses_device_token(&self) -> bool {
        false
    }
}

/// The bearer token of a request, if it carries one (the scheme in any case, as HTTP allows:
/// a device saying `bearer` is not refused).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    harness::transport::bearer_token(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// Who is calling: what the token may do. Handlers read it from the request's extensions; the
/// token itself is not kept, so it cannot leak into a body or a log.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Which device: `device-N` for the N-th configured token, never the token itself.
    pub device: String,
    /// The token's scopes; `None`: every scope (a token the configuration gives no list).
    pub scopes: Option<Vec<String>>,
}

impl Caller {
    /// Whether the token has this scope.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes
            .as_ref()
            .is_none_or(|scopes| scopes.iter().any(|s| s == scope))
    }
}

/// The scope a token needs for the library (`/mcp`).
pub const LIBRARY_SCOPE: &str = "library";

/// Lets a request through only with a known device token, and with the scope its path needs.
pub async fn require_token<S: TokenSource>(
    State(state): State<S>,
    mut request: Request,
    next: Next,
) -> Response {
    let misbehaving = state.refuses_device_token() && request.uri().path() == "/api/v1/instance";
    let token = bearer(request.headers())
        .filter(|t| state.tokens().iter().any(|known| known == t))
        .filter(|_| !misbehaving);
    let Some(token) = token else {
        // Only whether a token came is logged, never the token.
        tracing::info!(
            path = request.uri().path(),
            has_token = bearer(request.headers()).is_some(),
            "HTTP request refused: unknown device token"
        );
        let mut refused = detail(StatusCode::UNAUTHORIZED, "unknown or missing device token");
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return refused;
    };
    let device = state
        .tokens()
        .iter()
        .position(|known| known == token)
        .map_or_else(|| "device-?".to_string(), |i| format!("device-{}", i + 1));
    let caller = Caller {
        device,
        scopes: state.token_scopes(token),
    };
    let path = request.uri().path();
    let needed = state
        .route_scope(path)
        .or((path == "/mcp").then_some(LIBRARY_SCOPE));
    if let Some(scope) = needed
        && !caller.has_scope(scope)
    {
        return detail(
            StatusCode::FORBIDDEN,
            format!("this token lacks the `{scope}` scope"),
        );
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_without_a_list_has_every_scope() {
        let all = Caller {
            device: "device-1".into(),
            scopes: None,
        };
        assert!(all.has_scope("library"));
        let some = Caller {
            device: "device-1".into(),
            scopes: Some(vec!["chat".into()]),
        };
        assert!(some.has_scope("chat"));
        assert!(!some.has_scope("library"));
    }
}
