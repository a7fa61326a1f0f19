use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn every_address_a_webhook_could_turn_against_the_host_is_classified() {
    for (addr, why) in [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("0.0.0.0", "unspecified (0.0.0.0/8)"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "shared address space (100.64.0.0/10)"),
        ("100.127.255.254", "shared address space (100.64.0.0/10)"),
        ("169.254.169.254", "link-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved (240.0.0.0/4)"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("fc00::1", "private (fc00::/7)"),
        ("fd12:3456::1", "private (fc00::/7)"),
        ("ff02::1", "multicast"),
        ("fec0::1", "site-local"),
        // IPv6 addresses carrying IPv4 ones are judged as those.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "private"),
        ("::127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("192.0.0.1", "IETF protocol assignments (192.0.0.0/24)"),
        ("192.0.0.255", "IETF protocol assignments (192.0.0.0/24)"),
        ("198.18.0.1", "benchmarking (198.18.0.0/15)"),
        ("198.19.255.255", "benchmarking (198.18.0.0/15)"),
        ("64:ff9b:1::1", "local-use NAT64 (64:ff9b:1::/48)"),
        (
            "64:ff9b:1:ffff::808:808",
            "local-use NAT64 (64:ff9b:1::/48)",
        ),
        // 6to4: refused, as the IPv4 address it carries when that one is forbidden.
        ("2002:7f00:1::1", "loopback"),
        ("2002:a9fe:a9fe::", "link-local"),
        ("2002:c0a8:101::1", "private"),
        ("2002:808:808::1", "6to4 (2002::/16)"),
        ("::ffff:198.18.0.1", "benchmarking (198.18.0.0/15)"),
    ] {
        assert_eq!(forbidden(ip(addr)), Some(why), "{addr}");
    }
    for public in [
        "93.184.216.34",
        "172.15.255.255",
        "172.32.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "169.253.0.1",
        "8.8.8.8",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "192.0.1.1",
        "191.255.255.255",
        "198.17.255.255",
        "198.20.0.1",
        "64:ff9b:2::1",
        "2001:db9::1",
        "2003::1",
    ] {
        assert_eq!(forbidden(ip(public)), None, "{public}");
    }
}

#[test]
fn webhook_urls_are_read_strictly() {
    let url = parse("http://Hooks.Example.com:8080/a/b?c=d").unwrap();
    assert_eq!(
        (url.host.as_str(), url.port, url.path.as_str()),
        ("hooks.example.com", 8080, "/a/b?c=d")
    );
    assert_eq!(url.authority(), "hooks.example.com:8080");
    let url = parse("HTTP://[::1]").unwrap();
    assert_eq!(
        (url.host.as_str(), url.port, url.path.as_str()),
        ("::1", 80, "/")
    );
    assert_eq!(url.authority(), "[::1]:80");
    assert_eq!(url.literal(), Some(ip("::1")));
    assert_eq!(parse("http://10.0.0.1?x").unwrap().path, "/?x");
    let secure = parse("HTTPS://Hooks.Example.com/x").unwrap();
    assert!(
        secure.https,
        "https is read, marked never to be delivered to"
    );
    assert_eq!(secure.authority(), "hooks.example.com:443");
    assert!(!parse("http://h/").unwrap().https);
    assert_eq!(parse("https://h:8443/").unwrap().port, 8443);
    for (bad, says) in [
        ("ftp://hooks.example.com/", "only http://"),
        ("hooks.example.com/x", "not an absolute URL"),
        ("http://user:pw@hooks.example.com/", "userinfo"),
        ("http://hooks.example.com@127.0.0.1/", "userinfo"),
        ("http://hooks.example.com/#frag", "fragment"),
        ("http://hooks example.com/", "printable ASCII"),
        ("http://hooks.example.com/\u{e9}", "printable ASCII"),
        ("http:///path", "no host"),
        ("http://:80/", "no host"),
        ("http://hooks.example.com:0/", "1 to 65535"),
        ("http://hooks.example.com:65536/", "1 to 65535"),
        ("http://hooks.example.com:+80/", "1 to 65535"),
        ("http://hooks.example.com:/", "1 to 65535"),
        ("http://[::1/", "closing"),
        ("http://[::1]x/", "text after"),
        ("http://[zz]/", "not an IPv6 address"),
        ("http://ho_st/", "a host is"),
        ("http://::1/", "a host is"),
    ] {
        let err = parse(bad).expect_err(bad);
        assert!(err.contains(says), "{bad}: {err}");
    }
    let long = format!("http://h/{}", "a".repeat(MAX_URL));
    assert!(parse(&long).unwrap_err().contains("over 2048"));
}

#[test]
fn the_door_itself_is_recognized_however_it_is_bound() {
    let at = |text: &str| text.parse::<SocketAddr>().unwrap();
    assert!(is_door(at("127.0.0.1:4000"), at("127.0.0.1:4000")));
    assert!(is_door(at("[::ffff:127.0.0.1]:4000"), at("127.0.0.1:4000")));
    assert!(is_door(at("127.0.0.1:4000"), at("0.0.0.0:4000")));
    assert!(is_door(at("[::1]:4000"), at("[::]:4000")));
    // Bound to every address, a public address of this host reaches it too.
    assert!(is_door(at("203.0.113.7:4000"), at("0.0.0.0:4000")));
    assert!(is_door(at("[2001:db8::7]:4000"), at("[::]:4000")));
    assert!(!is_door(at("203.0.113.7:4001"), at("0.0.0.0:4000")));
    assert!(!is_door(at("127.0.0.1:4001"), at("127.0.0.1:4000")));
    assert!(!is_door(at("127.0.0.2:4000"), at("127.0.0.1:4000")));
}
