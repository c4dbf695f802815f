//! `tls-ciphers` (TLS 1.2, OpenSSL's cipher list) and `tls-ciphersuites`
//! (TLS 1.3) applied to rustls's suites, for the listener and for a
//! replica's link alike, as Redis applies them to both.
//!
//! rustls offers only ECDHE key exchange with AEAD ciphers, so a list can
//! only narrow that set. Suites are named as OpenSSL names them
//! (`ECDHE-RSA-AES256-GCM-SHA384`, `TLS_AES_256_GCM_SHA384`). A list that
//! names suites restricts to those rustls has, in the list's order
//! (`!NAME` or `-NAME` takes one out); a list of OpenSSL's class keywords
//! only (`HIGH:!aNULL:!MD5`, which every rustls suite satisfies) keeps
//! rustls's set, with a warning, since OpenSSL's class language is not
//! evaluated here. A list that names suites of which rustls has none is
//! refused rather than widened to suites the operator did not ask for.

use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::{CipherSuite, SupportedCipherSuite};

/// OpenSSL's names of the TLS 1.2 suites rustls implements.
const TLS12: [(&str, CipherSuite); 6] = [
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The TLS 1.3 suites rustls implements, by their standard names.
const TLS13: [(&str, CipherSuite); 3] = [
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// rustls's provider with the suites `ciphers` and `ciphersuites` leave.
pub fn provider(ciphers: &str, ciphersuites: &str) -> Result<CryptoProvider, String> {
    let mut p = ring::default_provider();
    let all = p.cipher_suites.clone();
    let pick = |names: &[CipherSuite]| -> Vec<SupportedCipherSuite> {
        names
            .iter()
            .filter_map(|n| all.iter().find(|s| s.suite() == *n).copied())
            .collect()
    };
    let tls13: Vec<CipherSuite> = all
        .iter()
        .filter(|s| s.tls13().is_some())
        .map(|s| s.suite())
        .collect();
    let tls12: Vec<CipherSuite> = all
        .iter()
        .filter(|s| s.tls13().is_none())
        .map(|s| s.suite())
        .collect();
    let tls13 = narrow("tls-ciphersuites", ciphersuites, &TLS13, tls13)?;
    let tls12 = narrow("tls-ciphers", ciphers, &TLS12, tls12)?;
    p.cipher_suites = pick(&[tls13, tls12].concat());
    Ok(p)
}

/// What one directive's list leaves of `offered`.
fn narrow(
    directive: &str,
    list: &str,
    names: &[(&str, CipherSuite)],
    offered: Vec<CipherSuite>,
) -> Result<Vec<CipherSuite>, String> {
    if list.trim().is_empty() {
        return Ok(offered);
    }
    let known = |t: &str| {
        names
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(t))
            .map(|&(_, s)| s)
    };
    let mut chosen = Vec::new();
    let mut removed = Vec::new();
    let mut unknown_suites = Vec::new();
    for token in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        if let Some(rest) = token.strip_prefix(['!', '-']) {
            removed.extend(known(rest));
        } else if token.starts_with(['+', '@']) {
            // Reordering and security levels: nothing to narrow.
        } else if let Some(s) = known(token) {
            if !chosen.contains(&s) {
                chosen.push(s);
            }
        } else if looks_like_a_suite(token) {
            unknown_suites.push(token);
        }
    }
    if !unknown_suites.is_empty() {
        tracing::warn!(
            "{directive}: {} not offered: rustls implements only ECDHE with AES-GCM or ChaCha20-Poly1305",
            unknown_suites.join(", ")
        );
    }
    let base = if chosen.is_empty() {
        if !unknown_suites.is_empty() {
            return Err(format!(
                "{directive} '{list}' names no suite durakv offers; it offers {}",
                names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ));
        }
        tracing::warn!(
            "{directive} '{list}' names classes, not suites: rustls's own ECDHE AEAD suites are offered (name them to narrow the set)"
        );
        offered
    } else {
        chosen
    };
    let left: Vec<CipherSuite> = base.into_iter().filter(|s| !removed.contains(s)).collect();
    if left.is_empty() {
        return Err(format!("{directive} '{list}' leaves no suite"));
    }
    Ok(left)
}

/// A suite name rather than a class keyword: OpenSSL's suite names join
/// their parts with '-', TLS 1.3's and IANA's with '_'.
fn looks_like_a_suite(token: &str) -> bool {
    token.contains('-') || token.starts_with("TLS_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suites(ciphers: &str, ciphersuites: &str) -> Vec<CipherSuite> {
        provider(ciphers, ciphersuites)
            .unwrap()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect()
    }

    #[test]
    fn empty_lists_keep_every_suite() {
        assert_eq!(
            suites("", "").len(),
            ring::default_provider().cipher_suites.len()
        );
    }

    #[test]
    fn named_suites_narrow_in_the_list_s_order() {
        let s = suites(
            "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256:AES256-SHA",
            "TLS_CHACHA20_POLY1305_SHA256",
        );
        assert_eq!(
            s,
            [
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ]
        );
    }

    #[test]
    fn class_keywords_keep_the_set_and_exclusions_take_one_out() {
        let all = suites("", "").len();
        assert_eq!(suites("HIGH:!aNULL:!MD5:@STRENGTH", "").len(), all);
        let s = suites("DEFAULT:!ECDHE-RSA-AES256-GCM-SHA384", "");
        assert_eq!(s.len(), all - 1);
        assert!(!s.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384));
    }

    #[test]
    fn lists_rustls_cannot_honour_are_refused() {
        let e = provider("AES256-SHA256:DHE-RSA-AES256-GCM-SHA384", "").unwrap_err();
        assert!(e.contains("names no suite durakv offers"), "{e}");
        let e = provider("", "TLS_AES_128_CCM_SHA256").unwrap_err();
        assert!(e.starts_with("tls-ciphersuites"), "{e}");
        let e = provider(
            "ECDHE-RSA-AES256-GCM-SHA384:!ECDHE-RSA-AES256-GCM-SHA384",
            "",
        )
        .unwrap_err();
        assert!(e.contains("leaves no suite"), "{e}");
    }
}
