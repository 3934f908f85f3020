//! Where an `http:`/`https:` URI points: host, port, `Host` header and request path, parsed from
//! the URI's opaque part and checked before anything touches the network.

/// Where to connect and what to ask for.
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) authority: String,
    pub(super) path: String,
}

impl Target {
    /// Parses the opaque part of `http://host[:port][/path][?query]`, i.e. `//host...`; the port
    /// defaults to `default_port`.
    pub(super) fn parse(opaque: &str, default_port: u16) -> Result<Target, &'static str> {
        let rest = opaque
            .strip_prefix("//")
            .ok_or("expected http://host[:port]/path")?;
        let rest = rest.split('#').next().unwrap_or_default();
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err("credentials in the URL are not supported");
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or("unterminated IPv6 address")?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err("missing host");
        }
        let port = match port {
            Some(port) => port.parse::<u16>().map_err(|_| "invalid port")?,
            None => default_port,
        };
        let path = match path {
            "" => "/".to_owned(),
            query if query.starts_with('?') => format!("/{query}"),
            path => path.to_owned(),
        };
        if path.chars().any(|c| c.is_ascii_control() || c == ' ') {
            return Err("the path contains spaces or control characters");
        }
        Ok(Target {
            host: host.to_owned(),
            port,
            authority: authority.to_owned(),
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_parsing() {
        let target = Target::parse("//127.0.0.1:8080/conf/node.yaml?v=1#frag", 80).expect("valid");
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 8080, "/conf/node.yaml?v=1")
        );
        let target = Target::parse("//[::1]:9/", 80).expect("ipv6");
        assert_eq!(
            (target.host.as_str(), target.port, target.authority.as_str()),
            ("::1", 9, "[::1]:9")
        );
        let target = Target::parse("//example.org", 80).expect("no path");
        assert_eq!((target.port, target.path.as_str()), (80, "/"));
        let target = Target::parse("//example.org?x=1", 443).expect("https default port");
        assert_eq!((target.port, target.path.as_str()), (443, "/?x=1"));
        assert!(Target::parse("example.org/x", 80).is_err());
        assert!(Target::parse("//user:pw@host/", 80).is_err());
        assert!(Target::parse("//host:99999/", 80).is_err());
        assert!(Target::parse("///path", 80).is_err());
    }
}
