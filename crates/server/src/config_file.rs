//! The configuration file given at start: durakv's TOML, or an operator's
//! existing `redis.conf` (`redis_conf`). Which one it is decides how it is
//! read and how CONFIG REWRITE writes it back.

use crate::config::{Config, ConfigFormat};
use std::path::Path;

/// The file's format: `.toml` files are TOML, `.conf` files Redis's; any
/// other name is TOML if it parses as TOML, else Redis's.
pub fn detect(path: &Path, text: &str) -> ConfigFormat {
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => ConfigFormat::Toml,
        Some("conf") => ConfigFormat::Redis,
        _ if text.parse::<toml::Table>().is_ok() => ConfigFormat::Toml,
        _ => ConfigFormat::Redis,
    }
}

impl Config {
    /// Loads `path` (in either format) onto this configuration and
    /// remembers it for CONFIG REWRITE and INFO's `config_file`.
    pub fn load_file(&mut self, path: &str) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {path}: {e}"))?;
        let format = detect(Path::new(path), &text);
        match format {
            ConfigFormat::Toml => self.apply_toml(&text).map_err(|e| format!("{path}: {e}"))?,
            ConfigFormat::Redis => self
                .apply_redis_conf(Path::new(path))
                .map_err(|e| e.to_string())?,
        }
        self.config_format = format;
        self.config_file = std::fs::canonicalize(path)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_formats_apart() {
        let p = |n: &str| Path::new(n).to_path_buf();
        assert_eq!(detect(&p("a.toml"), "port 1"), ConfigFormat::Toml);
        assert_eq!(detect(&p("redis.conf"), "port = 1"), ConfigFormat::Redis);
        assert_eq!(detect(&p("durakv.cfg"), "port = 1\n"), ConfigFormat::Toml);
        assert_eq!(detect(&p("redis-6380"), "port 6380\n"), ConfigFormat::Redis);
    }
}
