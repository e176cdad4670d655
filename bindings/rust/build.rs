// Finds libtern and c_api.h:
//   TERN_LIB_DIR      the folder holding libtern.so (a build tree or an installed lib/)
//   TERN_INCLUDE_DIR  the folder holding c_api.h
// else the installed package through pkg-config (tern.pc), else the linker's default paths and the
// header of this repository. The header's TERN_ABI_VERSION must be the one src/sys.rs was written
// for; the library's own version is checked again at run time (tern::check_abi).
use std::env;
use std::path::PathBuf;
use std::process::Command;

const SYS_ABI_VERSION: u32 = 1; // keep equal to sys::ABI_VERSION

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).arg("tern").output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TERN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=TERN_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let lib_dir = env::var("TERN_LIB_DIR")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| pkg_config(&["--variable=libdir"]));
    if let Some(dir) = &lib_dir {
        println!("cargo:rustc-link-search=native={}", dir);
        // Tests, examples and programs built here find the library without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
    println!("cargo:rustc-link-lib=dylib=tern");

    let include_dir = env::var("TERN_INCLUDE_DIR")
        .ok()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| pkg_config(&["--variable=includedir"]).map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../include")
        });
    let header = include_dir.join("c_api.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({}): set TERN_INCLUDE_DIR to the folder holding c_api.h",
            header.display(),
            e
        )
    });
    let abi = text
        .lines()
        .find_map(|l| l.strip_prefix("#define TERN_ABI_VERSION "))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or_else(|| panic!("{} defines no TERN_ABI_VERSION", header.display()));
    if abi != SYS_ABI_VERSION {
        panic!(
            "{} has ABI version {}, these bindings were written for {}",
            header.display(),
            abi,
            SYS_ABI_VERSION
        );
    }
    if let Some(dir) = &lib_dir {
        // Dependents' build scripts read it as DEP_TERN_LIB_DIR (to set their own rpath).
        println!("cargo:lib_dir={}", dir);
        println!("cargo:rustc-env=TERN_BUILD_LIB_DIR={}", dir);
    } else {
        println!("cargo:rustc-env=TERN_BUILD_LIB_DIR=");
    }
}
