//! Stand-in for `durakv bench ...` while the `durakv` binary is wired up by
//! others: `cargo run --release -p durakv-bench --example bench -- ycsb ...`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(durakv_bench::run(args));
}
