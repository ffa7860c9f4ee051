//! Reading an `Authorization` header's bearer token, as both doubles' servers (the link, the
//! HTTP API, the control API) must: the scheme is case-insensitive (RFC 7235, section 2.1), and
//! the token is what follows the space.

/// The token of an `Authorization` header value whose scheme is `Bearer` in any case; `None`
/// for another scheme, or a bearer with no token.
pub fn bearer_token(header_value: &str) -> Option<&str> {
    let (scheme, token) = header_value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_scheme_is_read_in_any_case_and_the_token_is_what_follows() {
        assert_eq!(bearer_token("Bearer tok-1"), Some("tok-1"));
        assert_eq!(bearer_token("bearer tok-1"), Some("tok-1"));
        assert_eq!(bearer_token("BEARER  tok-1 "), Some("tok-1"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer   "), None);
        assert_eq!(bearer_token("tok-1"), None);
    }
}
