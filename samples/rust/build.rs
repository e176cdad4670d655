// Programs that use the tern crate find libtern at run time through an rpath to the folder the
// crate linked (DEP_TERN_LIB_DIR, from the crate's build script); without one, the system's
// library path applies.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TERN_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
