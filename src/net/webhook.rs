//! Where a push notification may go: a webhook URL read strictly, and the addresses no webhook
//! may reach unless the capsule's manifest names its host (`network.push.allow`).
//!
//! A webhook URL comes from a client, and the session POSTs to it from the host it runs on: left
//! unchecked, any caller could make the session reach what only the host can — its loopback
//! services, a cloud's metadata endpoint at 169.254.169.254, the private network, the door
//! itself. So the check is on the *address connected to*, after resolution, never on the name:
//! a name is resolved once, the address checked, and exactly that address connected to
//! ([`crate::session::push`]), so a name that resolves to a public address when a config is set
//! and to a private one later (DNS rebinding) gains nothing.
//!
//! Invariants: [`parse`] accepts only `http://` and `https://` URLs (the latter kept, never
//! delivered: mur has no TLS client) of printable ASCII, at most [`MAX_URL`]
//! bytes, with a host, without userinfo or fragment, and never panics; [`forbidden`] classifies
//! an IPv4-mapped (or NAT64, or IPv4-compatible) IPv6 address as the IPv4 address it carries,
//! and refuses every 6to4 address (2002::/16: a relay may carry it to the IPv4 address inside,
//! which is named when it is forbidden itself).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest webhook URL taken, in bytes: what browsers and proxies take as a matter of course.
pub const MAX_URL: usize = 2048;

/// A webhook URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// The host as written, lowercased; an IPv6 literal without its brackets.
    pub host: String,
    pub port: u16,
    /// The path and query, starting with `/`.
    pub path: String,
    /// `https://`: mur has no TLS client, so nothing is ever delivered to it. Such a config is
    /// still taken — clients (the A2A TCK among them) set `https://` webhooks as a matter of
    /// course, and set/get/list/delete must work for them — and the session says at set time
    /// that it will not deliver.
    pub https: bool,
}

impl Url {
    /// The host as an IP address, when it is written as one.
    pub fn literal(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// The host and port as a `Host` header carries them.
    pub fn authority(&self) -> String {
        match self.literal() {
            Some(IpAddr::V6(_)) => format!("[{}]:{}", self.host, self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

/// Read `url` as a webhook: `http[s]://host[:port][/path][?query]`. Every refusal says what to
/// fix. An `https` URL is read (port 443 by default) and marked [`Url::https`]: mur has no TLS
/// (a static binary without a TLS stack: put a forwarding proxy on an allowed host in front of
/// an https receiver), so it is never delivered to.
pub fn parse(url: &str) -> Result<Url, String> {
    if url.len() > MAX_URL {
        return Err(format!("is {} bytes long, over {MAX_URL}", url.len()));
    }
    if let Some(bad) = url.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "holds {}: a URL is printable ASCII without spaces (percent-encode the rest)",
            bad.escape_debug()
        ));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("is not an absolute URL (http://host:port/path)".into());
    };
    let https = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        other => {
            return Err(format!(
                "has scheme '{other}': only http:// is delivered to"
            ));
        }
    };
    if rest.contains('#') {
        return Err("has a fragment (#...), which is never sent: remove it".into());
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err("carries userinfo (user@host): put credentials in the config's authentication, not the URL".into());
    }
    let (host, port) = split_port(authority, if https { 443 } else { 80 })?;
    check_host(host)?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok(Url {
        host: host.to_ascii_lowercase(),
        port,
        path,
        https,
    })
}

/// `host[:port]` or `[v6][:port]`: the host (brackets off) and the port (`default` when none).
fn split_port(authority: &str, default: u16) -> Result<(&str, u16), String> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6
                .split_once(']')
                .ok_or("has an IPv6 host without its closing ']'")?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or("has text after its IPv6 host")?,
                    ),
                ),
            }
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        None => default,
        Some(p) => p
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| p.parse::<u16>().ok())
            .flatten()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("has port '{}': a port is 1 to 65535", p.escape_debug()))?,
    };
    if authority.starts_with('[') && host.parse::<Ipv6Addr>().is_err() {
        return Err(format!("has '[{host}]', which is not an IPv6 address"));
    }
    Ok((host, port))
}

/// Whether `host` may name a webhook's host (or an allow-list entry): an IP address, or a name of
/// letters, digits, `-` and `.` of at most 253 characters.
pub fn check_host(host: &str) -> Result<(), String> {
    if host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'));
    match name_ok {
        true => Ok(()),
        false if host.is_empty() => Err("has no host".into()),
        false => Err(format!(
            "has host '{}': a host is an IP address or a name of letters, digits, '-' and '.'",
            host.escape_debug()
        )),
    }
}

/// Why no webhook may reach `ip` unless its host is allowed by name; `None`: a public address.
/// An IPv6 address carrying an IPv4 one (mapped, compatible or NAT64) is judged as that; a 6to4
/// one is refused whatever it carries, as what it carries when that is forbidden.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match (carried_v4(v6), v6.segments()[0]) {
            (_, 0x2002) => {
                let [_, a, b, ..] = v6.segments();
                Some(forbidden_v4(v4_of(a, b)).unwrap_or("6to4 (2002::/16)"))
            }
            (Some(v4), _) => forbidden_v4(v4),
            (None, _) => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        (0, _) => "unspecified (0.0.0.0/8)",
        (127, _) => "loopback",
        (10, _) | (192, 168) => "private",
        (172, 16..=31) => "private",
        (100, 64..=127) => "shared address space (100.64.0.0/10)",
        (169, 254) => "link-local",
        (192, 0) if ip.octets()[2] == 0 => "IETF protocol assignments (192.0.0.0/24)",
        (198, 18..=19) => "benchmarking (198.18.0.0/15)",
        (224..=239, _) => "multicast",
        _ if ip.is_broadcast() => "broadcast",
        (240..=255, _) => "reserved (240.0.0.0/4)",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match first {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        // Translated by a NAT64 of the operator's own, to whatever IPv4 addresses it chooses.
        0x64 if ip.segments()[1..3] == [0xff9b, 1] => "local-use NAT64 (64:ff9b:1::/48)",
        0xfc00..=0xfdff => "private (fc00::/7)",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local",
        0xff00..=0xffff => "multicast",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 one carries: `::ffff:a.b.c.d` (mapped), `::a.b.c.d` (compatible,
/// deprecated but still routed by some stacks), `64:ff9b::a.b.c.d` (NAT64).
fn carried_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let compatible = s[..6] == [0; 6] && !ip.is_unspecified() && !ip.is_loopback();
    (nat64 || compatible).then(|| v4_of(s[6], s[7]))
}

/// The IPv4 address two IPv6 segments spell.
fn v4_of(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// Whether `to` may be the door itself (`door` as it is bound): the same port, at the same
/// address — or, for a door bound to every address, at any address, since any of this host's
/// (a public one included) reaches it and which are this host's is not known here; a receiver
/// elsewhere on the door's port number is refused with it. Never delivered to, allowed or not:
/// a door that posts to itself feeds its own requests.
pub fn is_door(to: SocketAddr, door: SocketAddr) -> bool {
    // An IPv4-mapped address as the IPv4 address it is (and is connected to as).
    let (ip, door_ip) = (to.ip().to_canonical(), door.ip().to_canonical());
    to.port() == door.port() && (ip == door_ip || door_ip.is_unspecified())
}

#[cfg(test)]
mod tests;
