//! Records the compiler's version for `gyre -V` (nginx's "built by" line).
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let v = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "rustc".into());
    println!("cargo:rustc-env=GYRE_RUSTC_VERSION={v}");
    println!("cargo:rerun-if-env-changed=RUSTC");
}
