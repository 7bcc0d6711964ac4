//! The UniFFI binding generator, pinned to the same UniFFI version as
//! plan-ffi through the workspace lock file. Run by `bindings/generate.sh`.

fn main() {
    uniffi::uniffi_bindgen_main()
}
