//! The UniFFI binding generator, pinned to the same UniFFI version as
//! plan-ffi through the workspace lock file. Built by
//! `crates/ffi/bindings/build-uniffi-bindgen.sh`, exactly as maturin builds
//! it, and run by `generate.sh` and by maturin for the Python wheel.

fn main() {
    uniffi::uniffi_bindgen_main()
}
